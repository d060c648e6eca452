//! The kernel test suite, written once over the runtime and dtype and instantiated per runtime by
//! [`kernel_suite!`](crate::kernel_suite). Every optimizer comes from the table.

use rowshard_kernels::{
    Backend, BiasClock, DType, HyperParams, KernelError, LocalTable, Optimizer, Segments,
    TableConfig,
};

use crate::data::{Rng, ids_with_duplicates};
use crate::reference::{ReferenceTable, assert_close, tolerance};

/// Rows and dim of the suite's tables: dim 40 is not a multiple of 16, so the cpu runtime uses
/// 8-wide vectors, and wgpu 4-wide.
pub const ROWS: usize = 64;
/// Row length.
pub const DIM: usize = 40;
const STEPS: usize = 4;
const BATCH: usize = 48;

/// Hyper-parameters away from their defaults, so every slot of the kernel's block is exercised.
fn hyper(optimizer: Optimizer) -> HyperParams {
    let mut h = HyperParams::new(optimizer);
    for (name, value) in [
        ("weight_decay", 0.01),
        ("eps", 1e-6),
        ("beta1", 0.8),
        ("beta2", 0.95),
        ("alpha", 0.9),
    ] {
        if h.get(name).is_some() {
            h.set(name, value).unwrap();
        }
    }
    h
}

/// Runs `STEPS` steps of `config` on the device and on the f64 reference and compares weights
/// and every named state; untouched rows must keep their bits.
pub fn check_against_reference(backend: Backend, config: TableConfig) {
    let client = backend.client().expect("device");
    let mut rng = Rng::new(7 + config.optimizer as u64);
    let init = rng.values(ROWS * DIM, -0.5, 0.5);
    let mut table = LocalTable::new(&client, config, ROWS, &init).expect("table");
    let hyper = hyper(config.optimizer);
    for (name, value) in hyper.iter() {
        table.set_parameter(name, value).unwrap();
    }
    let mut reference = ReferenceTable::new(config, hyper, ROWS, &init);
    let lr = 0.05;
    for _ in 0..STEPS {
        let ids = ids_with_duplicates(&mut rng, ROWS, BATCH);
        let grads = rng.values(BATCH * DIM, -1.0, 1.0);
        table.apply(&ids, &grads, lr).expect("apply");
        reference.apply(&ids, &grads, lr as f64);
    }
    let what = format!("{backend} {config:?}");
    let weights = table.weights().unwrap();
    let mut tol = tolerance(config.weight_dtype);
    if config.state_dtype != DType::F32 {
        // Low-precision moments round differently in f32 and f64 math: a relative error of up to
        // one state ulp in each step's update.
        tol.0 += lr as f64 * STEPS as f64 * 2f64.powi(-7);
    }
    assert_close(
        &format!("{what} weights"),
        &weights,
        &reference.weights,
        tol,
    );
    for name in table.state_names() {
        let tol = tolerance(config.state_dtype);
        let tol = (tol.0 * 10.0, tol.1 * 2.0);
        assert_close(
            &format!("{what} state {name}"),
            &table.state(name).unwrap(),
            &reference.states[name],
            tol,
        );
    }
    // Rows ROWS/2.. never get a gradient: their weights keep the initial bits, states stay zero.
    let first_untouched = ROWS / 2 * DIM;
    let initial: Vec<f32> = init.iter().map(|&x| config.weight_dtype.round(x)).collect();
    assert!(
        weights[first_untouched..]
            .iter()
            .zip(&initial[first_untouched..])
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "{what}: untouched rows changed"
    );
    for name in table.state_names() {
        let state = table.state(name).unwrap();
        let from = if state.len() == ROWS {
            ROWS / 2
        } else {
            first_untouched
        };
        assert!(
            state[from..].iter().all(|&x| x.to_bits() == 0),
            "{what}: untouched state {name} changed"
        );
    }
}

/// Every optimizer of the table, with default options, for `dtype` weights.
pub fn every_optimizer(backend: Backend, dtype: DType) {
    for &optimizer in Optimizer::ALL {
        check_against_reference(backend, TableConfig::new(optimizer, dtype, DIM));
    }
}

/// Every option the table offers beyond the defaults: Adam's global clock, AdamW, and each state
/// dtype besides f32 that the runtime can store.
pub fn every_option(backend: Backend, dtype: DType, state_dtypes: &[DType]) {
    for &optimizer in Optimizer::ALL {
        let spec = optimizer.spec();
        let base = TableConfig::new(optimizer, dtype, DIM);
        if spec.bias_clocks {
            check_against_reference(backend, base.with_bias_clock(BiasClock::Global));
        }
        if spec.decoupled_weight_decay {
            check_against_reference(backend, base.with_decoupled_weight_decay(true));
        }
        for &sd in spec
            .state_dtypes
            .iter()
            .filter(|&&d| d != DType::F32 && state_dtypes.contains(&d))
        {
            check_against_reference(backend, base.with_state_dtype(sd));
        }
    }
}

/// Two Adam tables with the same random initial weights, and the generator that made them.
struct Twins {
    rng: Rng,
    init: Vec<f32>,
    a: LocalTable,
    b: LocalTable,
}

fn twins(backend: Backend, dtype: DType, seed: u64) -> Twins {
    let client = backend.client().unwrap();
    let mut rng = Rng::new(seed);
    let init = rng.values(ROWS * DIM, -1.0, 1.0);
    let config = TableConfig::new(Optimizer::Adam, dtype, DIM);
    let a = LocalTable::new(&client, config, ROWS, &init).unwrap();
    let b = LocalTable::new(&client, config, ROWS, &init).unwrap();
    Twins { rng, init, a, b }
}

/// Two tables fed the same steps end bit-identical, and `gather` returns rows in the caller's
/// order, duplicates included.
pub fn deterministic_and_gather(backend: Backend, dtype: DType) {
    let Twins {
        mut rng,
        init,
        mut a,
        mut b,
    } = twins(backend, dtype, 99);

    let rows = [5u32, 0, 63, 5, 17];
    let gathered = a.gather(&rows).unwrap();
    for (i, &r) in rows.iter().enumerate() {
        for k in 0..DIM {
            let expected = dtype.round(init[r as usize * DIM + k]);
            assert_eq!(
                gathered[i * DIM + k].to_bits(),
                expected.to_bits(),
                "gather row {r} elem {k}"
            );
        }
    }
    for _ in 0..3 {
        let ids: Vec<u32> = (0..256).map(|_| rng.below(8)).collect();
        let grads = rng.values(256 * DIM, -1.0, 1.0);
        a.apply(&ids, &grads, 0.01).unwrap();
        b.apply(&ids, &grads, 0.01).unwrap();
    }
    let (wa, wb) = (a.weights().unwrap(), b.weights().unwrap());
    assert!(
        wa.iter().zip(&wb).all(|(x, y)| x.to_bits() == y.to_bits()),
        "runs differ"
    );
    assert_eq!(a.state("m").unwrap(), b.state("m").unwrap());
}

/// Gradients handed to the fused update in parts (as a sharded table hands each sender's
/// message) update the table bit for bit as the same gradients in one buffer: every part lands at
/// its offset, empty parts included.
pub fn gradients_in_parts(backend: Backend, dtype: DType) {
    let Twins {
        mut rng,
        a: mut whole,
        b: mut parted,
        ..
    } = twins(backend, dtype, 7);
    for _ in 0..3 {
        let ids: Vec<u32> = (0..200).map(|_| rng.below(ROWS as u32)).collect();
        let grads = rng.values(ids.len() * DIM, -1.0, 1.0);
        let bytes: Vec<u8> = bytemuck::cast_slice(&grads).to_vec();
        let segments = Segments::group(&ids);
        let params = whole.next_params(0.01).unwrap();
        whole
            .apply_grouped(&segments, bytes.clone(), &params)
            .unwrap();
        // Cuts at rows 0 (an empty part), 37, 37 (another) and 120 of 200.
        let row = 4 * DIM;
        let uploads = parted.uploads().clone();
        let parts = [0, 0, 37, 37, 120, 200]
            .windows(2)
            .map(|w| uploads.bytes_from(bytes[w[0] * row..w[1] * row].to_vec(), 0))
            .collect();
        parted
            .apply_grouped_parts(&segments, parts, &params)
            .unwrap();
    }
    let (a, b) = (whole.weights().unwrap(), parted.weights().unwrap());
    assert!(
        a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
        "weights differ"
    );
    for name in whole.state_names() {
        assert_eq!(
            whole.state(name).unwrap(),
            parted.state(name).unwrap(),
            "{name}"
        );
    }
}

/// Stochastic rounding: reproducible from the seed, only ever the two neighbours of the exact
/// value, and unbiased on average, where round-to-nearest is not.
/// For f32 weights, where there is nothing to round, the option is refused.
pub fn stochastic_rounding(backend: Backend, dtype: DType) {
    let client = backend.client().unwrap();
    if dtype == DType::F32 {
        let config = TableConfig::new(Optimizer::Sgd, dtype, DIM).with_stochastic_rounding(true);
        let err = LocalTable::new(&client, config, 1, &[0.0; DIM]).unwrap_err();
        assert!(
            matches!(err, KernelError::UnsupportedOption { .. }),
            "{err}"
        );
        return;
    }
    let rows = 64;
    let init = vec![1.0f32; rows * DIM];
    let config = TableConfig::new(Optimizer::Sgd, dtype, DIM).with_stochastic_rounding(true);
    // One SGD step of w = 1 with g = 1 and lr = 2^-10 gives exactly 1 - 2^-10, a quarter of the way
    // (in units of the ulp below 1) from 1 to the next value down in both f16 and bf16... for bf16
    // the ulp below 1 is 2^-8; for f16 it is 2^-11, so use lr = 2^-13 there.
    let (lr, ulp) = match dtype {
        DType::BF16 => (2f32.powi(-10), 2f64.powi(-8)),
        _ => (2f32.powi(-13), 2f64.powi(-11)),
    };
    let exact = 1.0 - lr as f64;
    let run = |seed: u32| {
        let mut t = LocalTable::new(&client, config, rows, &init).unwrap();
        t.set_seed(seed);
        let ids: Vec<u32> = (0..rows as u32).collect();
        t.apply(&ids, &vec![1.0; rows * DIM], lr).unwrap();
        t.weights().unwrap()
    };
    let w = run(1);
    assert_eq!(w, run(1), "same seed, same result");
    assert_ne!(w, run(2), "another seed rounds differently");
    let (down, up) = (1.0 - ulp, 1.0);
    assert!(
        w.iter().all(|&x| x as f64 == down || x as f64 == up),
        "values other than the two neighbours"
    );
    let mean = w.iter().map(|&x| x as f64).sum::<f64>() / w.len() as f64;
    let nearest = up;
    assert!(
        (mean - exact).abs() < 0.1 * ulp,
        "mean {mean} is biased from {exact}"
    );
    assert!(
        (nearest - exact).abs() > 0.2 * ulp,
        "the test must tell SR from round-to-nearest"
    );
}

/// Instantiates the suite for one runtime: `kernel_suite!(Backend::Cpu, states: &[DType::BF16], f32 => F32, ...)`, with
/// the state dtypes that runtime can store.
#[macro_export]
macro_rules! kernel_suite {
    ($backend:expr, states: $states:expr, $($name:ident => $dtype:ident),+ $(,)?) => {
        $(
            mod $name {
                use rowshard_kernels::{Backend, DType};
                use $crate::suite;

                #[test]
                fn every_optimizer_matches_the_f64_reference() {
                    suite::every_optimizer($backend, DType::$dtype);
                }

                #[test]
                fn every_option_matches_the_f64_reference() {
                    suite::every_option($backend, DType::$dtype, $states);
                }

                #[test]
                fn deterministic_and_gather() {
                    suite::deterministic_and_gather($backend, DType::$dtype);
                }

                #[test]
                fn gradients_in_parts() {
                    suite::gradients_in_parts($backend, DType::$dtype);
                }

                #[test]
                fn stochastic_rounding() {
                    suite::stochastic_rounding($backend, DType::$dtype);
                }
            }
        )+
    };
}

//! Bad input to a [`LocalTable`] gets a typed error and changes nothing.

use rowshard_kernels::{
    Backend, DType, HyperParams, KernelError, LocalTable, NonFinitePolicy, Optimizer, Segments,
    TableConfig,
};
use rowshard_tests::data::Rng;
use rowshard_tests::reference::{ReferenceTable, assert_close, tolerance};

const DIM: usize = 16;
const ROWS: usize = 10;

fn table(optimizer: Optimizer) -> (LocalTable, Vec<f32>) {
    let client = Backend::Cpu.client().unwrap();
    let init = Rng::new(3).values(ROWS * DIM, -1.0, 1.0);
    (
        LocalTable::new(
            &client,
            TableConfig::new(optimizer, DType::F32, DIM),
            ROWS,
            &init,
        )
        .unwrap(),
        init,
    )
}

fn assert_unchanged(t: &LocalTable, init: &[f32]) {
    assert_eq!(t.weights().unwrap(), init, "weights changed");
    for name in t.state_names() {
        assert!(
            t.state(name).unwrap().iter().all(|&x| x == 0.0),
            "state {name} changed"
        );
    }
    assert_eq!(t.step(), 0, "step advanced");
}

#[test]
fn out_of_range_rows_are_refused_before_anything_changes() {
    let (mut t, init) = table(Optimizer::Adam);
    let err = t.apply(&[1, 10], &[0.5; 2 * DIM], 0.1).unwrap_err();
    assert_eq!(
        err,
        KernelError::RowOutOfRange {
            row: 10,
            rows: ROWS as u64
        }
    );
    assert_eq!(
        t.gather(&[u32::MAX]).unwrap_err(),
        KernelError::RowOutOfRange {
            row: u32::MAX as u64,
            rows: 10
        }
    );
    assert_unchanged(&t, &init);
}

#[test]
fn gradients_of_the_wrong_shape_are_refused() {
    let (mut t, init) = table(Optimizer::AdaGrad);
    let err = t.apply(&[1, 2], &[0.5; DIM], 0.1).unwrap_err();
    assert_eq!(
        err,
        KernelError::ShapeMismatch {
            what: "gradients",
            expected: 2 * DIM,
            got: DIM
        }
    );
    assert_unchanged(&t, &init);
}

#[test]
fn non_finite_gradients_are_refused_naming_the_row() {
    let (mut t, init) = table(Optimizer::RmsProp);
    let mut grads = vec![0.5; 3 * DIM];
    grads[2 * DIM + 3] = f32::NAN;
    let err = t.apply(&[4, 5, 6], &grads, 0.1).unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::NonFiniteGradient {
                row: 6,
                position: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_unchanged(&t, &init);
}

#[test]
fn non_finite_gradients_can_be_skipped_and_counted() {
    let (mut t, init) = table(Optimizer::Sgd);
    t.set_non_finite_policy(NonFinitePolicy::Skip);
    let mut grads = vec![0.5; 3 * DIM];
    grads[DIM] = f32::INFINITY;
    t.apply(&[4, 5, 4], &grads, 0.1).unwrap();
    assert_eq!(t.skipped_inputs(), 1);
    let mut reference =
        ReferenceTable::new(*t.config(), HyperParams::new(Optimizer::Sgd), ROWS, &init);
    reference.apply(&[4, 4], &[0.5; 2 * DIM], 0.1);
    assert_close(
        "weights after skipping",
        &t.weights().unwrap(),
        &reference.weights,
        tolerance(DType::F32),
    );
}

#[test]
fn hyper_parameters_are_checked_by_name_and_range() {
    let (mut t, init) = table(Optimizer::Adam);
    assert!(matches!(
        t.set_parameter("beta3", 0.5),
        Err(KernelError::UnknownHyperParameter { .. })
    ));
    assert!(matches!(
        t.set_parameter("beta1", 1.0),
        Err(KernelError::OutOfRange { .. })
    ));
    assert!(matches!(
        t.set_parameter("eps", f64::NAN),
        Err(KernelError::OutOfRange { .. })
    ));
    assert!(matches!(
        t.apply(&[1], &[0.5; DIM], -1.0),
        Err(KernelError::OutOfRange { .. })
    ));
    assert_eq!(t.hyper_params().get("beta1"), Some(0.9));
    t.set_parameter("beta1", 0.5).unwrap();
    assert_eq!(t.hyper_params().get("beta1"), Some(0.5));
    assert!(matches!(
        t.state("w"),
        Err(KernelError::UnknownState { .. })
    ));
    assert_unchanged(&t, &init);
}

#[test]
fn options_the_table_does_not_offer_are_refused() {
    let client = Backend::Cpu.client().unwrap();
    let refuse = |config: TableConfig| {
        let err = LocalTable::new(&client, config, 1, &[0.0; DIM]).unwrap_err();
        assert!(
            matches!(err, KernelError::UnsupportedOption { .. }),
            "{config:?}: {err}"
        );
    };
    refuse(TableConfig::new(Optimizer::Sgd, DType::F32, DIM).with_state_dtype(DType::BF16));
    refuse(TableConfig::new(Optimizer::RmsProp, DType::F32, DIM).with_decoupled_weight_decay(true));
    refuse(
        TableConfig::new(Optimizer::AdaGrad, DType::F32, DIM)
            .with_bias_clock(rowshard_kernels::BiasClock::Global),
    );
    let err = LocalTable::new(
        &client,
        TableConfig::new(Optimizer::Sgd, DType::F32, 0),
        1,
        &[],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::InvalidShape(_)));
    let err = LocalTable::new(
        &client,
        TableConfig::new(Optimizer::Sgd, DType::F32, DIM),
        2,
        &[0.0; DIM],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::ShapeMismatch { .. }));
}

#[test]
fn state_names_and_shapes_follow_the_table() {
    for &optimizer in Optimizer::ALL {
        let (t, _) = table(optimizer);
        let names: Vec<_> = optimizer.spec().states.iter().map(|s| s.name).collect();
        assert_eq!(t.state_names(), names);
        for slot in optimizer.spec().states {
            let len = t.state(slot.name).unwrap().len();
            let expected = match slot.shape {
                rowshard_kernels::StateShape::PerElement => ROWS * DIM,
                rowshard_kernels::StateShape::PerRow => ROWS,
            };
            assert_eq!(len, expected, "{optimizer} {}", slot.name);
        }
    }
}

#[test]
fn empty_steps_and_gathers_are_fine() {
    let (mut t, init) = table(Optimizer::Adam);
    assert!(t.gather(&[]).unwrap().is_empty());
    t.apply(&[], &[], 0.1).unwrap();
    assert_eq!(t.weights().unwrap(), init);
}

#[test]
fn grouped_steps_that_do_not_fit_their_gradients_are_refused() {
    let (mut t, init) = table(Optimizer::Adam);
    let params = t.next_params(0.1).unwrap();
    let grads = |rows: usize| vec![0.5f32; rows * DIM];
    let segments = Segments::group(&[1, 3, 1]);
    let apply = |t: &mut LocalTable, segments: &Segments, grads: Vec<f32>| {
        let bytes = t.uploads().bytes_of(&grads);
        t.apply_grouped_parts(segments, vec![bytes], &params)
    };
    // A row past the table.
    let far = Segments::group(&[1, ROWS as u32]);
    assert_eq!(
        apply(&mut t, &far, grads(2)).unwrap_err(),
        KernelError::RowOutOfRange {
            row: ROWS as u64,
            rows: ROWS as u64
        }
    );
    // Fewer gradient rows than the inputs point at.
    assert!(matches!(
        apply(&mut t, &segments, grads(2)).unwrap_err(),
        KernelError::ShapeMismatch {
            expected: 3,
            got: 2,
            ..
        }
    ));
    // Gradient bytes that are not whole rows.
    let mut ragged = grads(3);
    ragged.pop();
    assert!(matches!(
        apply(&mut t, &segments, ragged).unwrap_err(),
        KernelError::ShapeMismatch { .. }
    ));
    // Offsets that do not walk the inputs.
    let broken = Segments {
        offsets: vec![0, 3, 2],
        ..segments.clone()
    };
    assert!(matches!(
        apply(&mut t, &broken, grads(3)).unwrap_err(),
        KernelError::ShapeMismatch { .. }
    ));
    assert_unchanged(&t, &init);
    // The same step, well formed, goes through.
    apply(&mut t, &segments, grads(3)).unwrap();
    assert_eq!(t.step(), 1);
}

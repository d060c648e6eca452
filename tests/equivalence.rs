//! The multi-rank equivalence check, shared by the thread-rank tests and the MPI program: `W`
//! ranks each apply their own batches; one rank applies the union of every step's batches (in
//! rank order); the resulting tables and states must agree.

use rowshard::{
    Backend, Communicator, DType, HyperParams, Optimizer, PartitionScheme, ShardError,
    ShardedTable, ShardedTableSpec, StateLocation, TableConfig,
};

use crate::data::Rng;
use crate::reference::{assert_close, tolerance};

/// Rows of the test table.
pub const ROWS: usize = 37;
/// Row length.
pub const DIM: usize = 8;
/// Steps per run.
pub const STEPS: usize = 3;

/// Per step, per rank: ids and gradients.
pub type Steps = Vec<Vec<(Vec<u32>, Vec<f32>)>>;

/// The spec every run uses.
pub fn spec(optimizer: Optimizer, dtype: DType, scheme: PartitionScheme) -> ShardedTableSpec {
    ShardedTableSpec {
        rows: ROWS,
        config: TableConfig::new(optimizer, dtype, DIM),
        scheme,
        init: rowshard::Initializer::Uniform {
            bound: 0.5,
            seed: 11,
        },
        state_location: StateLocation::WithShard,
        cache: rowshard::cache::CachePolicy::None,
        hyper: HyperParams::new(optimizer),
    }
}

/// Even blocks, uneven explicit counts (with an empty rank when `world > 2`), round-robin blocks.
pub fn schemes(world: usize) -> Vec<PartitionScheme> {
    let mut counts = vec![ROWS / world; world];
    counts[0] += ROWS % world;
    if world > 2 {
        counts[0] += counts[1];
        counts[1] = 0;
    }
    vec![
        PartitionScheme::Even,
        PartitionScheme::Explicit(counts),
        PartitionScheme::RoundRobin { block: 3 },
    ]
}

/// Seeded batches. With `unique_per_rank`, no id repeats within a rank's batch (ids still repeat
/// across ranks), so the summation order matches one rank's exactly.
pub fn batches(world: usize, unique_per_rank: bool, seed: u64) -> Steps {
    let mut rng = Rng::new(seed);
    (0..STEPS)
        .map(|_| {
            (0..world)
                .map(|r| {
                    let n = 6 + r;
                    let ids: Vec<u32> = if unique_per_rank {
                        let mut all: Vec<u32> = (0..ROWS as u32 - 5).collect();
                        for i in 0..n {
                            let j = i + rng.below((all.len() - i) as u32) as usize;
                            all.swap(i, j);
                        }
                        all.truncate(n);
                        all
                    } else {
                        (0..n)
                            .map(|i| {
                                if i % 3 == 0 {
                                    4
                                } else {
                                    rng.below(ROWS as u32 - 5)
                                }
                            })
                            .collect()
                    };
                    let grads = rng.values(n * DIM, -1.0, 1.0);
                    (ids, grads)
                })
                .collect()
        })
        .collect()
}

/// One equivalence case: a description, the spec, the steps, and whether the result must be
/// bit-identical to one rank's.
pub struct Case {
    /// For failure messages.
    pub what: String,
    /// The table.
    pub spec: ShardedTableSpec,
    /// Every rank's batches.
    pub steps: Steps,
    /// Whether the summation order matches one rank's (then results must match bit for bit).
    pub exact: bool,
}

/// The cases for `world` ranks: every partition scheme, with and without ids repeated within a
/// rank's batch.
pub fn cases(world: usize, optimizer: Optimizer, dtype: DType) -> Vec<Case> {
    let mut cases = Vec::new();
    for scheme in schemes(world) {
        for exact in [true, false] {
            cases.push(Case {
                what: format!("{optimizer} {dtype} W={world} {scheme:?} unique_per_rank={exact}"),
                spec: spec(optimizer, dtype, scheme.clone()),
                steps: batches(world, exact, world as u64 * 31 + optimizer as u64),
                exact,
            });
        }
    }
    cases
}

/// Checks rank 0's gathered result of `case` against one rank (other ranks pass `None`).
pub fn check(case: &Case, gathered: Gathered) {
    if let Some(multi) = gathered {
        assert_equivalent(
            &case.what,
            &multi,
            &one_rank(&case.spec, &case.steps),
            case.exact,
            case.spec.config.weight_dtype,
        );
    }
}

/// One rank doing each step's union of the ranks' batches, in rank order.
pub fn union(steps: &Steps) -> Steps {
    steps
        .iter()
        .map(|step| {
            let ids = step.iter().flat_map(|(i, _)| i.clone()).collect();
            let grads = step.iter().flat_map(|(_, g)| g.clone()).collect();
            vec![(ids, grads)]
        })
        .collect()
}

/// The table and every state, gathered on rank 0 (`None` elsewhere).
pub type Gathered = Option<(Vec<f32>, Vec<Vec<f32>>)>;

/// This rank's part of a run: lookups and updates for every step, then the table and every
/// state gathered on rank 0 in small chunks.
pub fn run_rank(
    comm: &dyn Communicator,
    spec: &ShardedTableSpec,
    steps: &Steps,
) -> Result<Gathered, ShardError> {
    let client = Backend::Cpu.client()?;
    let mut table = ShardedTable::new(comm, &client, spec)?;
    for step in steps {
        let (ids, grads) = &step[comm.rank()];
        let rows = table.lookup(ids)?;
        assert_eq!(rows.len(), ids.len() * DIM);
        table.apply_gradients(ids, grads, 0.05)?;
    }
    let weights = table.gather_to_root(0, 4)?;
    let mut states = Vec::new();
    for name in table.state_names() {
        states.push(table.gather_state_to_root(name, 0, 3)?);
    }
    Ok(weights.map(|w| (w, states.into_iter().map(|s| s.expect("root")).collect())))
}

/// The single-rank result for `steps`' union, computed on a world of one thread.
pub fn one_rank(spec: &ShardedTableSpec, steps: &Steps) -> (Vec<f32>, Vec<Vec<f32>>) {
    let single = ShardedTableSpec {
        scheme: PartitionScheme::Even,
        ..spec.clone()
    };
    let union = union(steps);
    let mut results = rowshard::comm::threads::run(1, |comm| run_rank(comm, &single, &union));
    results.remove(0).expect("one rank").expect("root")
}

/// Asserts a multi-rank result equals the one-rank result: bit for bit when the summation order
/// is the same (`unique_per_rank`), else within the dtype's tolerance.
pub fn assert_equivalent(
    what: &str,
    multi: &(Vec<f32>, Vec<Vec<f32>>),
    one: &(Vec<f32>, Vec<Vec<f32>>),
    exact: bool,
    dtype: DType,
) {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    if exact {
        assert_eq!(bits(&multi.0), bits(&one.0), "{what}: weights");
        for (a, b) in multi.1.iter().zip(&one.1) {
            assert_eq!(bits(a), bits(b), "{what}: states");
        }
    } else {
        assert_close(what, &multi.0, &f64s(&one.0), tolerance(dtype));
        for (a, b) in multi.1.iter().zip(&one.1) {
            assert_close(&format!("{what} state"), a, &f64s(b), (1e-5, 1e-4));
        }
    }
}

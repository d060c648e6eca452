//! `rowshard demo`: a table sharded over thread ranks, trained for a few
//! steps with routed lookups and fused Adam updates, checked against one rank, with the JIT time.

use std::time::Instant;

use rowshard_kernels::{Backend, DType, HyperParams, KernelSet, Optimizer, TableConfig};

use crate::bench::sharded::{IdDistribution, IdSampler};
use rowshard::comm::{Communicator, threads};
use rowshard::error::ShardError;
use rowshard::init::Initializer;
use rowshard::partition::PartitionScheme;
use rowshard::sharded::{ShardedTable, ShardedTableSpec, StateLocation};

const ROWS: usize = 20_000;
const DIM: usize = 64;
const BATCH: usize = 8192;
const STEPS: usize = 10;
const RANKS: usize = 2;

/// Every rank's batches: Zipf-distributed ids (many duplicates) and seeded gradients.
fn batches(world: usize) -> Vec<Vec<(Vec<u32>, Vec<f32>)>> {
    let mut samplers: Vec<_> = (0..world)
        .map(|r| IdSampler::new(ROWS, IdDistribution::Zipf(1.0), 17 + r as u64))
        .collect();
    let mut rng = rowshard::init::SplitMix64::new(5);
    (0..STEPS)
        .map(|_| {
            samplers
                .iter_mut()
                .map(|s| {
                    let ids = s.sample(BATCH / world);
                    let grads = (0..ids.len() * DIM).map(|_| rng.next_f32() - 0.5).collect();
                    (ids, grads)
                })
                .collect()
        })
        .collect()
}

/// Trains on `world` thread ranks; returns the whole table (from rank 0), the seconds rank 0
/// spent in steps, and each rank's applied rows.
fn train(
    spec: &ShardedTableSpec,
    steps: &[Vec<(Vec<u32>, Vec<f32>)>],
    world: usize,
    backend: Backend,
) -> Result<(Vec<f32>, f64, Vec<u64>), ShardError> {
    let results = threads::run(world, |comm| -> Result<_, ShardError> {
        let client = backend.client()?;
        let mut table = ShardedTable::new(comm, &client, spec)?;
        let start = Instant::now();
        for step in steps {
            let (ids, grads) = &step[comm.rank()];
            let rows = table.lookup(ids)?;
            debug_assert_eq!(rows.len(), grads.len());
            table.apply_gradients(ids, grads, 0.01)?;
        }
        let seconds = start.elapsed().as_secs_f64();
        if comm.rank() == 1 {
            // Bad input on one rank is refused on every rank, and changes nothing.
            let refused = table.lookup(&[ROWS as u32]);
            println!(
                "  rank 1 asked for id {ROWS}: {}",
                refused.err().map_or("accepted?!".into(), |e| e.to_string())
            );
        } else {
            let _ = table.lookup(&[0]);
        }
        Ok((
            table.gather_to_root(0, 4096)?,
            seconds,
            table.rows_applied(),
        ))
    });
    let mut full = None;
    let mut seconds = 0.0;
    let mut applied = Vec::new();
    for (rank, result) in results.into_iter().enumerate() {
        let (table, s, a) = result?;
        if rank == 0 {
            full = table;
            seconds = s;
        }
        applied.push(a);
    }
    Ok((full.expect("rank 0 gathers the table"), seconds, applied))
}

/// Runs the demo on `backend` and prints a report.
pub fn run(backend: Backend) -> Result<(), ShardError> {
    let config = TableConfig::new(Optimizer::Adam, DType::F32, DIM);
    println!(
        "rowshard demo: a {ROWS} x {DIM} f32 table sharded over {RANKS} thread ranks (round-robin rows), \
         fused Adam, {backend} runtime"
    );
    let client = backend.client()?;
    let kernels = KernelSet::new(&client, config)?;
    println!(
        "  JIT: gather + fused Adam compiled at start-up in {:.1} ms (vector width {})",
        kernels.jit_time().as_secs_f64() * 1e3,
        kernels.vector_size()
    );
    let spec = ShardedTableSpec {
        rows: ROWS,
        config,
        scheme: PartitionScheme::RoundRobin { block: 1 },
        init: Initializer::Normal { std: 0.1, seed: 7 },
        state_location: StateLocation::WithShard,
        cache: rowshard::cache::CachePolicy::None,
        hyper: HyperParams::new(config.optimizer),
    };
    let steps = batches(RANKS);
    let unique: usize = steps[0]
        .iter()
        .map(|(ids, _)| rowshard_kernels::Segments::group(ids).len())
        .sum();
    println!(
        "  {STEPS} steps of {BATCH} Zipf(1) ids ({} per rank, {unique} unique in step 1): routed lookup, \
         duplicate-summed gradients routed to owners, fused Adam there",
        BATCH / RANKS
    );
    let (sharded, seconds, applied) = train(&spec, &steps, RANKS, backend)?;
    let total: u64 = applied.iter().sum();
    println!(
        "  {:.1} ms per step, {:.2} M looked-up rows/s; rows applied per rank: {applied:?} (busiest {:.0}%)",
        seconds * 1e3 / STEPS as f64,
        (STEPS * BATCH) as f64 / seconds / 1e6,
        100.0 * *applied.iter().max().unwrap_or(&0) as f64 / total.max(1) as f64
    );

    // The same steps on one rank, each step's batches concatenated in rank order.
    let union: Vec<Vec<(Vec<u32>, Vec<f32>)>> = steps
        .iter()
        .map(|s| {
            vec![(
                s.iter().flat_map(|b| b.0.clone()).collect(),
                s.iter().flat_map(|b| b.1.clone()).collect(),
            )]
        })
        .collect();
    let single = ShardedTableSpec {
        scheme: PartitionScheme::Even,
        ..spec.clone()
    };
    let (one, _, _) = train(&single, &union, 1, backend)?;
    let max_diff = sharded
        .iter()
        .zip(&one)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    let moved = sharded
        .iter()
        .zip(spec.init.values(0, ROWS, DIM))
        .filter(|(a, b)| a != &b)
        .count();
    println!(
        "  {moved} of {} weights moved; largest difference from one rank doing the same steps: {max_diff:e} \
         (duplicate sums associate differently across ranks)",
        ROWS * DIM
    );
    Ok(())
}

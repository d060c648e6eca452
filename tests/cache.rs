//! The read-only cache changes nothing but speed: every lookup and the final table and states are
//! bit for bit those of the same table without a cache — for every optimizer and dtype, ratios
//! 1/512, 1/8 and 1, 1 to 4 ranks, duplicate and shared ids, lookups repeated between updates
//! (hits that must not be stale) and an eviction storm. A bad ratio is refused on every rank.

use rowshard::cache::{CachePolicy, CacheStats};
use rowshard::comm::threads;
use rowshard::{
    Backend, Communicator, DType, Optimizer, PartitionScheme, ShardError, ShardedTable,
    ShardedTableSpec, TABLE,
};
use rowshard_tests::equivalence::{Steps, batches, spec};

/// Every lookup of every step on this rank, the table and states on rank 0, and the cache's
/// statistics.
type Run = (Vec<Vec<f32>>, Option<(Vec<f32>, Vec<Vec<f32>>)>, CacheStats);

fn run_rank(
    comm: &dyn Communicator,
    spec: &ShardedTableSpec,
    steps: &Steps,
) -> Result<Run, ShardError> {
    let client = Backend::Cpu.client()?;
    let mut table = ShardedTable::new(comm, &client, spec)?;
    let all: Vec<u32> = (0..spec.rows as u32).rev().collect();
    let mut lookups = Vec::new();
    for step in steps {
        let (ids, grads) = &step[comm.rank()];
        // A lookup of everything, then the batch twice: the second is served by the cache
        // wherever the first filled it.
        lookups.push(table.lookup(&all)?);
        lookups.push(table.lookup(ids)?);
        lookups.push(table.lookup(ids)?);
        table.apply_gradients(ids, grads, 0.05)?;
        // Right after an update: rows any rank just updated must not come from a stale copy.
        lookups.push(table.lookup(ids)?);
    }
    let weights = table.gather_to_root(0, 5)?;
    let mut states = Vec::new();
    for name in table.state_names() {
        states.push(table.gather_state_to_root(name, 0, 5)?);
    }
    let gathered = weights.map(|w| (w, states.into_iter().map(|s| s.expect("root")).collect()));
    Ok((lookups, gathered, table.cache_stats()))
}

fn run(world: usize, spec: &ShardedTableSpec, steps: &Steps) -> Vec<Run> {
    threads::run(world, |comm| run_rank(comm, spec, steps))
        .into_iter()
        .map(|r| r.expect("rank"))
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Runs `spec` with and without the cache and asserts they agree bit for bit; returns the
/// cached run's statistics summed over ranks.
fn check(world: usize, spec: &ShardedTableSpec, ratio: f64, what: &str) -> CacheStats {
    let steps = batches(world, false, 7 + world as u64);
    let plain = run(world, spec, &steps);
    let cached_spec = ShardedTableSpec {
        cache: CachePolicy::ReadOnly { ratio },
        ..spec.clone()
    };
    let cached = run(world, &cached_spec, &steps);
    let mut total = CacheStats::default();
    for (rank, (p, c)) in plain.iter().zip(&cached).enumerate() {
        for (k, (a, b)) in p.0.iter().zip(&c.0).enumerate() {
            assert_eq!(bits(a), bits(b), "{what}: rank {rank}, lookup {k}");
        }
        if let (Some(a), Some(b)) = (&p.1, &c.1) {
            assert_eq!(bits(&a.0), bits(&b.0), "{what}: weights");
            for (x, y) in a.1.iter().zip(&b.1) {
                assert_eq!(bits(x), bits(y), "{what}: states");
            }
        }
        total.hits += c.2.hits;
        total.misses += c.2.misses;
        total.evictions += c.2.evictions;
        total.invalidations += c.2.invalidations;
        total.bytes_not_sent += c.2.bytes_not_sent;
    }
    total
}

#[test]
fn every_optimizer_and_dtype_with_a_read_only_cache_equals_no_cache() {
    for opt in TABLE {
        for dtype in DType::ALL {
            let spec = spec(
                opt.optimizer,
                dtype,
                PartitionScheme::RoundRobin { block: 3 },
            );
            let stats = check(2, &spec, 1.0 / 8.0, &format!("{} {dtype}", opt.name));
            assert!(stats.hits > 0 && stats.bytes_not_sent > 0, "{stats:?}");
            assert!(stats.invalidations > 0, "updates invalidate: {stats:?}");
        }
    }
}

#[test]
fn every_ratio_and_rank_count_equals_no_cache() {
    for dtype in [DType::F32, DType::BF16] {
        for world in 1..=4 {
            for ratio in [1.0 / 512.0, 1.0 / 8.0, 1.0] {
                let spec = spec(Optimizer::Adam, dtype, PartitionScheme::Even);
                let what = format!("adam {dtype} W={world} ratio {ratio}");
                let stats = check(world, &spec, ratio, &what);
                if world == 1 {
                    assert_eq!(stats.hits + stats.misses, 0, "one rank has no remote rows");
                }
            }
        }
    }
}

#[test]
fn an_eviction_storm_changes_nothing() {
    // 4,096 rows and ratio 1/512: one set of 32 lines for thousands of remote rows, every
    // lookup of everything evicting.
    for world in [2, 3] {
        let spec = ShardedTableSpec {
            rows: 4096,
            ..spec(
                Optimizer::RmsProp,
                DType::F16,
                PartitionScheme::RoundRobin { block: 1 },
            )
        };
        let stats = check(world, &spec, 1.0 / 512.0, &format!("storm W={world}"));
        assert!(stats.evictions > 1000, "{stats:?}");
    }
}

#[test]
fn a_bad_ratio_is_refused_on_every_rank() {
    for ratio in [0.0, 1.0 / 1024.0, 1.5, f64::NAN] {
        let spec = ShardedTableSpec {
            cache: CachePolicy::ReadOnly { ratio },
            ..spec(Optimizer::Sgd, DType::F32, PartitionScheme::Even)
        };
        let results = threads::run(2, |comm| -> Result<_, ShardError> {
            let client = Backend::Cpu.client()?;
            ShardedTable::new(comm, &client, &spec).map(|_| ())
        });
        for r in results {
            let e = r.unwrap_err();
            assert!(
                matches!(&e, ShardError::InvalidCache(m) if m.contains("[1/512, 1]")),
                "{ratio}: {e}"
            );
        }
    }
}

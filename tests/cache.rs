//! Caches change nothing but speed: every lookup and the final table and states are bit for bit
//! those of the same table without a cache — read-only and read-write, for every optimizer and
//! dtype, ratios 1/512, 1/8 and 1, 1 to 4 ranks, duplicate and shared ids, lookups repeated
//! between updates (hits that must not be stale), batches larger than the cache (rounds),
//! `write_back_all`/`drop_all` and eviction storms; the read-write cache also on `wgpu`, where its
//! lines are device buffers distinct from the host store. Bad ratios, a failed write-back and
//! what the read-write cache cannot do are refused with the table unchanged.

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
    backend: Backend,
    spec: &ShardedTableSpec,
    steps: &Steps,
) -> Result<Run, ShardError> {
    let client = backend.client()?;
    let mut table = ShardedTable::new(comm, &client, spec)?;
    let all: Vec<u32> = (0..spec.rows as u32).rev().collect();
    let mut lookups = Vec::new();
    // Every row updated at once: more rows than a small cache holds (several rounds).
    let grads: Vec<f32> = (0..all.len() * spec.config.dim)
        .map(|i| ((i * 7919 + comm.rank() * 13) % 101) as f32 / 101.0 - 0.5)
        .collect();
    table.apply_gradients(&all, &grads, 0.01)?;
    for (k, step) in steps.iter().enumerate() {
        let (ids, grads) = &step[comm.rank()];
        // A lookup of everything, then the batch twice: the second is served by the cache
        // wherever the first filled it.
        lookups.push(table.lookup(&all)?);
        lookups.push(table.lookup(ids)?);
        lookups.push(table.lookup(ids)?);
        table.apply_gradients(ids, grads, 0.05)?;
        // Right after an update: rows any rank just updated must not come from a stale copy.
        lookups.push(table.lookup(ids)?);
        // No-ops without a read-write cache.
        if k == 1 {
            table.drop_all()?;
        } else {
            table.write_back_all()?;
        }
    }
    let weights = table.gather_to_root(0, 5)?;
    let mut states = Vec::new();
    for name in table.state_names() {
        states.push(table.gather_state_to_root(name, 0, 5)?);
    }
    let gathered = weights.map(|w| (w, states.into_iter().map(|s| s.expect("root")).collect()));
    Ok((lookups, gathered, table.cache_stats()))
}

fn run(world: usize, backend: Backend, spec: &ShardedTableSpec, steps: &Steps) -> Vec<Run> {
    threads::run(world, |comm| run_rank(comm, backend, spec, steps))
        .into_iter()
        .map(|r| r.expect("rank"))
        .collect()
}

/// Asserts `a` and `b` are bit for bit equal, naming the first value that differs.
fn assert_same(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
        panic!("{what}: value {i} differs: {} vs {}", a[i], b[i]);
    }
}

/// Runs `spec` with and without the cache `policy` on `backend` and asserts they agree bit for
/// bit; returns the cached run's statistics summed over ranks.
fn check_on(
    backend: Backend,
    world: usize,
    spec: &ShardedTableSpec,
    policy: CachePolicy,
    what: &str,
) -> CacheStats {
    let steps = batches(world, false, 7 + world as u64);
    let plain = run(world, backend, spec, &steps);
    let cached_spec = ShardedTableSpec {
        cache: policy,
        ..spec.clone()
    };
    let cached = run(world, backend, &cached_spec, &steps);
    let mut total = CacheStats::default();
    for (rank, (p, c)) in plain.iter().zip(&cached).enumerate() {
        for (k, (a, b)) in p.0.iter().zip(&c.0).enumerate() {
            assert_same(a, b, &format!("{what}: rank {rank}, lookup {k}"));
        }
        if let (Some(a), Some(b)) = (&p.1, &c.1) {
            assert_same(&a.0, &b.0, &format!("{what}: weights"));
            for (x, y) in a.1.iter().zip(&b.1) {
                assert_same(x, y, &format!("{what}: states"));
            }
        }
        total.hits += c.2.hits;
        total.misses += c.2.misses;
        total.evictions += c.2.evictions;
        total.invalidations += c.2.invalidations;
        total.write_backs += c.2.write_backs;
        total.bytes_not_sent += c.2.bytes_not_sent;
    }
    total
}

/// The errors two ranks get creating `spec` on `backend` (each must be refused).
fn refusals(backend: Backend, spec: &ShardedTableSpec) -> Vec<ShardError> {
    threads::run(2, |comm| -> Result<_, ShardError> {
        let client = backend.client()?;
        ShardedTable::new(comm, &client, spec).map(|_| ())
    })
    .into_iter()
    .map(|r| r.expect_err("refused"))
    .collect()
}

/// [`check_on`] the `cpu` runtime with a read-only cache of `ratio`.
fn check(world: usize, spec: &ShardedTableSpec, ratio: f64, what: &str) -> CacheStats {
    check_on(
        Backend::Cpu,
        world,
        spec,
        CachePolicy::ReadOnly { ratio },
        what,
    )
}

/// The ratios every equivalence test runs at: WholeMemory's smallest, a typical one, and all.
const RATIOS: [f64; 3] = [1.0 / 512.0, 1.0 / 8.0, 1.0];

/// Runs `f` on every case of the equivalence tests' cross product: each optimizer (and its name),
/// dtype, rank count 1 to 4 and ratio.
fn every_case(mut f: impl FnMut(Optimizer, &str, DType, usize, f64)) {
    for opt in TABLE {
        for dtype in DType::ALL {
            for world in 1..=4 {
                for ratio in RATIOS {
                    f(opt.optimizer, opt.name, dtype, world, ratio);
                }
            }
        }
    }
}

#[test]
fn every_optimizer_dtype_ratio_and_rank_count_with_a_read_only_cache_equals_no_cache() {
    every_case(|optimizer, name, dtype, world, ratio| {
        let spec = spec(optimizer, dtype, PartitionScheme::RoundRobin { block: 3 });
        let what = format!("read-only {name} {dtype} W={world} ratio {ratio}");
        let stats = check(world, &spec, ratio, &what);
        if world == 1 {
            assert_eq!(stats.hits + stats.misses, 0, "one rank has no remote rows");
        } else {
            assert!(
                stats.hits > 0 && stats.bytes_not_sent > 0,
                "{what}: {stats:?}"
            );
            assert!(stats.invalidations > 0, "{what}: updates invalidate");
        }
    });
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
        for e in refusals(Backend::Cpu, &spec) {
            assert!(
                matches!(&e, ShardError::InvalidCache(m) if m.contains("[1/512, 1]")),
                "{ratio}: {e}"
            );
        }
    }
}

/// A table of `rows` rows, spread over the ranks in blocks of 3.
fn wide(optimizer: Optimizer, dtype: DType, rows: usize) -> ShardedTableSpec {
    ShardedTableSpec {
        rows,
        ..spec(optimizer, dtype, PartitionScheme::RoundRobin { block: 3 })
    }
}

#[test]
fn every_optimizer_dtype_ratio_and_rank_count_with_a_read_write_cache_equals_no_cache() {
    every_case(|optimizer, name, dtype, world, ratio| {
        let what = format!("read-write {name} {dtype} W={world} ratio {ratio}");
        let policy = CachePolicy::ReadWrite { ratio };
        // 300 rows: at least 75 per rank, more than the 32 lines of a small cache.
        let spec = wide(optimizer, dtype, 300);
        let stats = check_on(Backend::Cpu, world, &spec, policy, &what);
        assert!(stats.hits > 0 && stats.misses > 0, "{what}: {stats:?}");
        if ratio == 1.0 {
            assert_eq!(stats.evictions, 0, "{what}: every row has a line");
        } else {
            assert!(
                stats.evictions > 0 && stats.write_backs > 0,
                "{what}: {stats:?}"
            );
        }
    });
}

#[test]
fn an_eviction_storm_through_the_read_write_cache_changes_nothing() {
    for world in [1, 3] {
        let spec = wide(Optimizer::RowWiseAdaGrad, DType::F16, 4096);
        let policy = CachePolicy::ReadWrite { ratio: 1.0 / 512.0 };
        let stats = check_on(
            Backend::Cpu,
            world,
            &spec,
            policy,
            &format!("storm W={world}"),
        );
        assert!(
            stats.evictions > 1000 && stats.write_backs > 1000,
            "{stats:?}"
        );
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn the_read_write_cache_on_wgpu_equals_no_cache() {
    use rowshard::StateLocation;
    for dtype in [DType::F32, DType::F16] {
        for opt in [Optimizer::Adam, Optimizer::RowWiseAdaGrad] {
            let spec = ShardedTableSpec {
                state_location: StateLocation::Host,
                ..wide(opt, dtype, 300)
            };
            // The reference keeps its state on the device: state in host memory on a GPU
            // runtime is what the read-write cache makes possible.
            let plain = ShardedTableSpec {
                state_location: StateLocation::WithShard,
                ..spec.clone()
            };
            let policy = CachePolicy::ReadWrite { ratio: 1.0 / 8.0 };
            let steps = batches(2, false, 9);
            let expected = run(2, Backend::Wgpu, &plain, &steps);
            let cached = run(
                2,
                Backend::Wgpu,
                &ShardedTableSpec {
                    cache: policy,
                    ..spec
                },
                &steps,
            );
            let what = format!("wgpu {opt} {dtype}");
            for (p, c) in expected.iter().zip(&cached) {
                for (k, (a, b)) in p.0.iter().zip(&c.0).enumerate() {
                    assert_same(a, b, &format!("{what}: lookup {k}"));
                }
                if let (Some(a), Some(b)) = (&p.1, &c.1) {
                    assert_same(&a.0, &b.0, &format!("{what}: weights"));
                }
                assert!(c.2.write_backs > 0, "{what}: {:?}", c.2);
            }
        }
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn state_in_host_memory_on_wgpu_needs_the_read_write_cache() {
    use rowshard::StateLocation;
    let spec = ShardedTableSpec {
        state_location: StateLocation::Host,
        ..spec(Optimizer::Adam, DType::F32, PartitionScheme::Even)
    };
    for e in refusals(Backend::Wgpu, &spec) {
        assert!(
            matches!(&e, ShardError::Unsupported(m) if m.contains("read-write cache")),
            "{e}"
        );
    }
}

#[test]
fn a_failed_write_back_changes_nothing() {
    let spec = wide(Optimizer::Adam, DType::F32, 300);
    let cached_spec = ShardedTableSpec {
        cache: CachePolicy::ReadWrite { ratio: 1.0 / 8.0 },
        ..spec.clone()
    };
    for world in [1, 2] {
        let steps = batches(world, false, 5);
        let results = threads::run(world, |comm| -> Result<_, ShardError> {
            let client = Backend::Cpu.client()?;
            let mut plain = ShardedTable::new(comm, &client, &spec)?;
            let mut cached = ShardedTable::new(comm, &client, &cached_spec)?;
            let all: Vec<u32> = (0..spec.rows as u32).collect();
            for (k, step) in steps.iter().enumerate() {
                let (ids, grads) = &step[comm.rank()];
                plain.apply_gradients(ids, grads, 0.05)?;
                cached.apply_gradients(ids, grads, 0.05)?;
                if k == 0 {
                    let before = cached.cache_stats();
                    cached.fail_next_write_back();
                    let e = cached.write_back_all().unwrap_err();
                    assert!(
                        matches!(&e, ShardError::WriteBack(m) if m.contains("unchanged")),
                        "{e}"
                    );
                    assert_eq!(cached.cache_stats(), before);
                }
                if k == 1 && world == 1 {
                    // A lookup of every row evicts modified lines: their write-back fails.
                    cached.fail_next_write_back();
                    let e = cached.lookup(&all).unwrap_err();
                    assert!(matches!(&e, ShardError::WriteBack(_)), "{e}");
                }
            }
            Ok((
                plain.lookup(&all)?,
                cached.lookup(&all)?,
                plain.gather_state_to_root("v", 0, 7)?,
                cached.gather_state_to_root("v", 0, 7)?,
            ))
        });
        for r in results {
            let (a, b, va, vb) = r.expect("rank");
            assert_same(&a, &b, "rows after a failed write-back");
            if let (Some(va), Some(vb)) = (va, vb) {
                assert_same(&va, &vb, "state v after a failed write-back");
            }
        }
    }
}

#[test]
fn what_the_read_write_cache_cannot_do_is_refused() {
    let policy = CachePolicy::ReadWrite { ratio: 1.0 / 8.0 };
    let rounding = ShardedTableSpec {
        config: spec(Optimizer::Sgd, DType::BF16, PartitionScheme::Even)
            .config
            .with_stochastic_rounding(true),
        cache: policy,
        ..spec(Optimizer::Sgd, DType::BF16, PartitionScheme::Even)
    };
    let odd = ShardedTableSpec {
        config: rowshard::TableConfig::new(Optimizer::Sgd, DType::F16, 7),
        cache: policy,
        ..spec(Optimizer::Sgd, DType::F16, PartitionScheme::Even)
    };
    for (spec, expected) in [(rounding, "stochastic rounding"), (odd, "even dim")] {
        for e in refusals(Backend::Cpu, &spec) {
            assert!(e.to_string().contains(expected), "{e}");
        }
    }
}

#[test]
fn a_table_the_runtime_cannot_hold_is_refused_before_anything_is_allocated() {
    // 4e9 rows of 4096 f32 values: 32 TB of weights per rank, far beyond this machine; the
    // refusal comes before any allocation (the test would run out of memory otherwise).
    let huge = ShardedTableSpec {
        rows: 4_000_000_000,
        config: rowshard::TableConfig::new(Optimizer::Adam, DType::F32, 4096),
        ..spec(Optimizer::Adam, DType::F32, PartitionScheme::Even)
    };
    for (policy, expected) in [
        (CachePolicy::None, "read-write cache"),
        (CachePolicy::ReadWrite { ratio: 1.0 }, "smaller ratio"),
    ] {
        let spec = ShardedTableSpec {
            cache: policy,
            ..huge.clone()
        };
        for e in refusals(Backend::Cpu, &spec) {
            assert!(
                matches!(&e, ShardError::InvalidCache(m) if m.contains(expected)),
                "{policy:?}: {e}"
            );
        }
    }
}

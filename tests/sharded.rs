//! The sharded table on thread ranks, checked against one rank processing the union of the
//! ranks' batches, for every optimizer × dtype × partition scheme and 2, 3 and 4 ranks; plus
//! bad input on one rank, mismatched ranks and failing ranks.

use std::time::{Duration, Instant};

use rowshard::comm::threads;
use rowshard::{
    Backend, CommError, Communicator, DType, InputError, NonFinitePolicy, Optimizer,
    PartitionScheme, ShardError, ShardedTable, ShardedTableSpec, StateLocation, TABLE,
};
use rowshard_tests::equivalence::{DIM, ROWS, cases, check, run_rank, spec};

fn check_equivalence(optimizer: Optimizer, dtype: DType) {
    for world in [2, 3, 4] {
        for case in cases(world, optimizer, dtype) {
            let results = threads::run(world, |comm| run_rank(comm, &case.spec, &case.steps));
            let mut results: Vec<_> = results.into_iter().map(|r| r.expect("rank")).collect();
            assert!(
                results[1..].iter().all(Option::is_none),
                "only rank 0 gets the table"
            );
            check(&case, results.remove(0));
        }
    }
}

macro_rules! equivalence_tests {
    ($($name:ident => $dtype:ident),+) => {
        $(
            #[test]
            fn $name() {
                for spec in TABLE {
                    check_equivalence(spec.optimizer, DType::$dtype);
                }
            }
        )+
    };
}

equivalence_tests!(
    every_optimizer_on_2_3_4_ranks_equals_one_rank_f32 => F32,
    every_optimizer_on_2_3_4_ranks_equals_one_rank_f16 => F16,
    every_optimizer_on_2_3_4_ranks_equals_one_rank_bf16 => BF16
);

#[test]
fn lookup_returns_rows_in_the_callers_order_for_tiny_and_empty_shards() {
    for (rows, world) in [(5, 4), (2, 4), (1, 3)] {
        let spec = ShardedTableSpec {
            rows,
            ..spec(Optimizer::Sgd, DType::F32, PartitionScheme::Even)
        };
        let expected = spec.init.values(0, rows, DIM);
        let results = threads::run(world, |comm| -> Result<_, ShardError> {
            let client = Backend::Cpu.client()?;
            let table = ShardedTable::new(comm, &client, &spec)?;
            let ids: Vec<u32> = (0..rows as u32).rev().chain([0, 0]).collect();
            Ok((ids.clone(), table.lookup(&ids)?))
        });
        for result in results {
            let (ids, got) = result.unwrap();
            for (i, &id) in ids.iter().enumerate() {
                assert_eq!(
                    &got[i * DIM..][..DIM],
                    &expected[id as usize * DIM..][..DIM],
                    "{rows} rows on {world} ranks"
                );
            }
        }
    }
}

/// Every rank runs `bad` (rank 1 with the bad input, the others with good input), checks the
/// error, and the table and states are unchanged everywhere.
fn refused_everywhere(
    policy: NonFinitePolicy,
    bad: impl Fn(&mut ShardedTable, usize) -> Result<(), ShardError> + Sync,
    expected: InputError,
) {
    let spec = spec(
        Optimizer::Adam,
        DType::F32,
        PartitionScheme::RoundRobin { block: 2 },
    );
    let results = threads::run(3, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut table = ShardedTable::new(comm, &client, &spec)?;
        table.set_non_finite_policy(policy);
        table.apply_gradients(&[1, 2], &[0.5; 2 * DIM], 0.1)?;
        let before = (
            table.gather_to_root(0, 5)?,
            table.gather_state_to_root("m", 0, 5)?,
            table.step(),
        );
        let err = bad(&mut table, comm.rank()).expect_err("refused");
        let after = (
            table.gather_to_root(0, 5)?,
            table.gather_state_to_root("m", 0, 5)?,
            table.step(),
        );
        Ok((
            err.to_string(),
            matches!(err, ShardError::BadInput { rank: 1, error } if error == expected),
            before == after,
        ))
    });
    for (rank, result) in results.into_iter().enumerate() {
        let (message, right_error, unchanged) = result.unwrap();
        assert!(right_error, "rank {rank}: {message}");
        assert!(unchanged, "rank {rank}: something changed");
    }
}

#[test]
fn an_out_of_range_id_on_one_rank_is_refused_on_every_rank_and_changes_nothing() {
    let ids = |rank| {
        if rank == 1 {
            vec![3, ROWS as u32]
        } else {
            vec![3, 4]
        }
    };
    refused_everywhere(
        NonFinitePolicy::Reject,
        |t, rank| t.lookup(&ids(rank)).map(|_| ()),
        InputError::IdOutOfRange {
            id: ROWS as u64,
            rows: ROWS as u64,
        },
    );
    refused_everywhere(
        NonFinitePolicy::Reject,
        |t, rank| t.apply_gradients(&ids(rank), &[0.1; 2 * DIM], 0.1),
        InputError::IdOutOfRange {
            id: ROWS as u64,
            rows: ROWS as u64,
        },
    );
}

#[test]
fn bad_gradients_on_one_rank_are_refused_on_every_rank_and_change_nothing() {
    refused_everywhere(
        NonFinitePolicy::Reject,
        |t, rank| {
            t.apply_gradients(
                &[3, 4],
                &vec![0.1; if rank == 1 { DIM } else { 2 * DIM }],
                0.1,
            )
        },
        InputError::GradientShape {
            expected: 2 * DIM as u64,
            got: DIM as u64,
        },
    );
    refused_everywhere(
        NonFinitePolicy::Reject,
        |t, rank| {
            let mut g = vec![0.1; 2 * DIM];
            if rank == 1 {
                g[DIM + 2] = f32::NAN;
            }
            t.apply_gradients(&[3, 4], &g, 0.1)
        },
        InputError::NonFiniteGradient { id: 4, position: 1 },
    );
    refused_everywhere(
        NonFinitePolicy::Reject,
        |t, rank| t.apply_gradients(&[3], &[0.1; DIM], if rank == 1 { -1.0 } else { 0.1 }),
        InputError::LearningRate {
            value: (-1.0f32).to_bits() as u64,
        },
    );
}

#[test]
fn skipped_non_finite_gradients_are_counted_and_the_rest_applied() {
    let spec = spec(Optimizer::Sgd, DType::F32, PartitionScheme::Even);
    let step = |nan: bool| {
        let mut g = vec![0.25; 2 * DIM];
        if nan {
            g[0] = f32::INFINITY;
        }
        g
    };
    let skip = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut table = ShardedTable::new(comm, &client, &spec)?;
        table.set_non_finite_policy(NonFinitePolicy::Skip);
        table.apply_gradients(&[30, 2], &step(comm.rank() == 0), 0.1)?;
        Ok((table.gather_to_root(0, 8)?, table.skipped_inputs()))
    });
    let clean = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut table = ShardedTable::new(comm, &client, &spec)?;
        let (ids, grads) = if comm.rank() == 0 {
            (vec![2], vec![0.25; DIM])
        } else {
            (vec![30, 2], step(false))
        };
        table.apply_gradients(&ids, &grads, 0.1)?;
        table.gather_to_root(0, 8)
    });
    let skip: Vec<_> = skip.into_iter().map(Result::unwrap).collect();
    assert_eq!(skip.iter().map(|s| s.1).collect::<Vec<_>>(), vec![1, 0]);
    assert_eq!(skip[0].0, *clean[0].as_ref().unwrap());
}

#[test]
fn ranks_that_disagree_on_the_table_are_told_so() {
    let results = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let scheme = if comm.rank() == 0 {
            PartitionScheme::Even
        } else {
            PartitionScheme::RoundRobin { block: 4 }
        };
        ShardedTable::new(comm, &client, &spec(Optimizer::Sgd, DType::F32, scheme)).map(|_| ())
    });
    for r in results {
        let message = r.as_ref().map(|_| ()).unwrap_err().to_string();
        assert!(
            matches!(&r, Err(ShardError::Mismatch { field, .. }) if field == "partition"),
            "{message}"
        );
        // Only the field that differs is reported, not every rank's whole description.
        assert!(!message.contains("optimizer"), "{message}");
    }
    let results = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let rows = if comm.rank() == 0 { ROWS } else { ROWS + 1 };
        ShardedTable::new(
            comm,
            &client,
            &ShardedTableSpec {
                rows,
                ..spec(Optimizer::Sgd, DType::F32, PartitionScheme::Even)
            },
        )
        .map(|_| ())
    });
    for r in &results {
        assert!(
            matches!(r, Err(ShardError::Mismatch { field, values, .. })
                if field == "rows" && values == &format!("rank 0: {ROWS}, rank 1: {}", ROWS + 1)),
            "{r:?}"
        );
    }
}

#[test]
fn hyper_parameters_in_the_spec_are_applied_and_must_agree() {
    let with_beta1 = |beta1: f64| {
        let mut spec = spec(Optimizer::Adam, DType::F32, PartitionScheme::Even);
        spec.hyper.set("beta1", beta1).unwrap();
        spec
    };
    let agreed = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let table = ShardedTable::new(comm, &client, &with_beta1(0.5))?;
        Ok(table.shard().hyper_params().get("beta1"))
    });
    assert!(agreed.into_iter().all(|r| r.unwrap() == Some(0.5)));
    let disagreed = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let beta1 = if comm.rank() == 0 { 0.5 } else { 0.6 };
        ShardedTable::new(comm, &client, &with_beta1(beta1)).map(|_| ())
    });
    for r in &disagreed {
        assert!(
            matches!(r, Err(ShardError::Mismatch { field, values, others })
                if field == "beta1" && values == "rank 0: 0.5, rank 1: 0.6" && others.is_empty()),
            "{r:?}"
        );
    }
    let wrong = threads::run(1, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut spec = with_beta1(0.5);
        spec.hyper = rowshard::HyperParams::new(Optimizer::Sgd);
        ShardedTable::new(comm, &client, &spec).map(|_| ())
    });
    assert!(matches!(wrong[0], Err(ShardError::Unsupported(_))));
}

#[test]
fn a_failing_rank_makes_the_others_return_an_error_not_hang() {
    let start = Instant::now();
    let results = threads::run_with_timeout(
        3,
        Duration::from_secs(60),
        |comm| -> Result<_, ShardError> {
            let client = Backend::Cpu.client()?;
            let table = ShardedTable::new(
                comm,
                &client,
                &spec(Optimizer::Sgd, DType::F32, PartitionScheme::Even),
            )?;
            if comm.rank() == 2 {
                panic!("rank 2 fails on purpose");
            }
            table.lookup(&[1, 2, 3])?;
            Ok(())
        },
    );
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
    for (rank, r) in results.iter().enumerate() {
        assert!(
            matches!(
                r,
                Err(ShardError::Comm(CommError::PeerFailed { rank: 2, .. }))
            ),
            "rank {rank}: {r:?}"
        );
    }
}

#[test]
fn state_in_host_memory_is_accepted_on_the_cpu_runtime() {
    let spec = ShardedTableSpec {
        state_location: StateLocation::Host,
        cache: rowshard::cache::CachePolicy::None,
        ..spec(Optimizer::Adam, DType::F32, PartitionScheme::Even)
    };
    let results = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        ShardedTable::new(comm, &client, &spec).map(|t| t.state_names())
    });
    assert!(
        results
            .into_iter()
            .all(|r| r.unwrap() == vec!["m", "v", "step"])
    );
}

/// The table after one step of `step` on `world` ranks (rank 0's gathered weights and first
/// state), from `spec`.
fn after_step(
    spec: &ShardedTableSpec,
    world: usize,
    step: impl Fn(&mut ShardedTable, &cubecl::prelude::Client, usize) -> Result<(), ShardError> + Sync,
) -> (Vec<f32>, Vec<f32>) {
    let state = spec.config.optimizer.spec().states.first().map(|s| s.name);
    let results = threads::run(world, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut table = ShardedTable::new(comm, &client, spec)?;
        step(&mut table, &client, comm.rank())?;
        let states = match state {
            Some(name) => table.gather_state_to_root(name, 0, 7)?,
            None => Some(Vec::new()),
        };
        Ok((table.gather_to_root(0, 7)?, states))
    });
    let (w, s) = results.into_iter().next().unwrap().unwrap();
    (w.unwrap(), s.unwrap())
}

#[test]
fn a_device_gradient_of_the_whole_shard_equals_the_same_rows_from_the_host() {
    use cubecl::bytes::Bytes;
    use rowshard::sharded::DeviceGradient;
    for optimizer in [Optimizer::Sgd, Optimizer::AdaGrad, Optimizer::Adam] {
        for world in [1, 2, 3] {
            let spec = spec(
                optimizer,
                DType::F32,
                PartitionScheme::RoundRobin { block: 3 },
            );
            // Rank r's routed rows (duplicates included) and its shard's dense gradient; all
            // positive, so no sum cancels to rounding noise that AdaGrad and Adam would magnify.
            let sparse = |rank: usize| -> (Vec<u32>, Vec<f32>) {
                let ids: Vec<u32> = (0..9).map(|k| ((k * 7 + rank * 5) % ROWS) as u32).collect();
                let grads = (0..ids.len() * DIM)
                    .map(|i| ((i * 13 + rank) % 17) as f32 * 0.01 + 0.01)
                    .collect();
                (ids, grads)
            };
            let dense = |table: &ShardedTable, rank: usize| -> (Vec<u32>, Vec<f32>) {
                let local = table.partition().local_rows(rank);
                let ids = (0..local)
                    .map(|l| table.partition().global(rank, l) as u32)
                    .collect();
                let grads = (0..local * DIM)
                    .map(|i| ((i * 5 + 3) % 11) as f32 * 0.02 + 0.02)
                    .collect();
                (ids, grads)
            };
            let from_host = after_step(&spec, world, |table, _, rank| {
                let (mut ids, mut grads) = sparse(rank);
                let (dense_ids, dense_grads) = dense(table, rank);
                ids.extend(dense_ids);
                grads.extend(dense_grads);
                table.apply_gradients(&ids, &grads, 0.05)
            });
            // With room after the shard's rows for every routed row of the global batch, and
            // with none (the rows that arrive are then copied in with the shard's).
            for room in [9 * world, 0] {
                let on_device = after_step(&spec, world, |table, client, rank| {
                    let (ids, grads) = sparse(rank);
                    let (dense_ids, mut dense_grads) = dense(table, rank);
                    dense_grads.resize((dense_ids.len() + room) * DIM, 0.0);
                    let handle = client.create(Bytes::from_elems(dense_grads));
                    let device = DeviceGradient {
                        handle: &handle,
                        rows: dense_ids.len(),
                    };
                    table.apply_gradients_with_device(&ids, &grads, device, 0.05)
                });
                for (what, got, want) in [
                    ("weights", &on_device.0, &from_host.0),
                    ("state", &on_device.1, &from_host.1),
                ] {
                    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
                        assert!(
                            (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                            "{optimizer:?} on {world} ranks, room {room}, {what}[{i}]: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }
    // A device gradient that is not one row per local row is refused, on every rank.
    let spec = spec(Optimizer::Sgd, DType::F32, PartitionScheme::Even);
    let results = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut table = ShardedTable::new(comm, &client, &spec)?;
        let before = table.gather_to_root(0, 7)?;
        let handle = client.create(Bytes::from_elems(vec![0.0f32; 4 * DIM]));
        let device = DeviceGradient {
            handle: &handle,
            rows: 3,
        };
        let refused = table.apply_gradients_with_device(&[0], &[0.1; DIM], device, 0.1);
        Ok((refused, before == table.gather_to_root(0, 7)?))
    });
    for r in results {
        let (refused, unchanged) = r.unwrap();
        assert!(
            matches!(
                refused,
                Err(ShardError::BadInput {
                    error: InputError::GradientShape { .. },
                    ..
                })
            ),
            "{refused:?}"
        );
        assert!(unchanged);
    }
}

//! The NCCL communicator is compiled in CI; where no GPU (or no NCCL) is present, joining it
//! returns a clean error on every rank, never a panic or a hang. On a GPU machine, it runs the
//! thread-rank equivalence check over NCCL.

use rowshard::comm::nccl::NcclComm;
use rowshard::comm::{CommError, threads};
use rowshard::{DType, Optimizer, PartitionScheme, ShardError};
use rowshard_tests::equivalence::{assert_equivalent, batches, one_rank, run_rank, spec};

#[test]
fn nccl_joins_or_refuses_cleanly_and_routes_like_one_rank_where_it_runs() {
    let world = 2;
    let steps = batches(world, true, 5);
    let spec = spec(
        Optimizer::Adam,
        DType::F32,
        PartitionScheme::RoundRobin { block: 3 },
    );
    let results = threads::run(world, |bootstrap| -> Result<_, ShardError> {
        let nccl = match NcclComm::new(bootstrap, 0) {
            Ok(nccl) => nccl,
            Err(e) => return Ok(Err(e)),
        };
        Ok(Ok(run_rank(&nccl, &spec, &steps)?))
    });
    let results: Vec<_> = results
        .into_iter()
        .map(|r| r.expect("no rank may fail outright"))
        .collect();
    match &results[0] {
        Err(CommError::Transport {
            backend: "nccl",
            reason,
        }) => {
            eprintln!(
                "NCCL is not available here ({reason}); checked that every rank refused cleanly"
            );
            assert!(results.iter().all(|r| r.is_err()));
        }
        Err(other) => panic!("unexpected error: {other}"),
        Ok(gathered) => {
            let multi = gathered.clone().expect("rank 0 gathers");
            assert_equivalent("nccl", &multi, &one_rank(&spec, &steps), true, DType::F32);
        }
    }
}

//! The multi-rank equivalence check under MPI: start with `mpirun -np N mpi_equivalence N`.
//!
//! Every rank runs every optimizer × dtype × partition scheme of the thread-rank test; rank 0
//! compares the gathered table and states with one rank processing the union of the batches.
//! `mpi_equivalence N fail` instead makes rank 1 panic after creating its table, to show the job
//! ends with an error rather than hanging.

use rowshard::comm::mpi::MpiComm;
use rowshard::{Backend, Communicator, DType, Optimizer, PartitionScheme, ShardedTable, TABLE};
use rowshard_tests::equivalence::{assert_equivalent, batches, one_rank, run_rank, schemes, spec};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let expected_world: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .expect("usage: mpi_equivalence WORLD [fail]");
    let comm = MpiComm::init().expect("MPI");
    // A binary started by the wrong launcher runs N worlds of one: refuse that.
    assert_eq!(
        comm.world(),
        expected_world,
        "started with the wrong launcher or -np"
    );
    let world = comm.world();

    if args.get(2).map(String::as_str) == Some("fail") {
        let client = Backend::Cpu.client().expect("cpu");
        let table = ShardedTable::new(
            &comm,
            &client,
            &spec(Optimizer::Sgd, DType::F32, PartitionScheme::Even),
        )
        .expect("table");
        if comm.rank() == 1 {
            panic!("rank 1 fails on purpose");
        }
        let _ = table.lookup(&[1, 2, 3]);
        let _ = table.lookup(&[1, 2, 3]);
        println!("rank {} was not stopped", comm.rank());
        return;
    }

    let mut cases = 0;
    for table_row in TABLE {
        for dtype in DType::ALL {
            for scheme in schemes(world) {
                for unique_per_rank in [true, false] {
                    let steps = batches(
                        world,
                        unique_per_rank,
                        world as u64 * 31 + table_row.optimizer as u64,
                    );
                    let spec = spec(table_row.optimizer, dtype, scheme.clone());
                    let gathered = run_rank(&comm, &spec, &steps).expect("rank");
                    if let Some(multi) = gathered {
                        let what = format!(
                            "mpi {} {dtype} W={world} {scheme:?} unique_per_rank={unique_per_rank}",
                            table_row.optimizer
                        );
                        assert_equivalent(
                            &what,
                            &multi,
                            &one_rank(&spec, &steps),
                            unique_per_rank,
                            dtype,
                        );
                    }
                    cases += 1;
                }
            }
        }
    }
    comm.barrier().expect("barrier");
    if comm.rank() == 0 {
        println!("mpi equivalence: {cases} cases on {world} ranks equal one rank");
    }
}

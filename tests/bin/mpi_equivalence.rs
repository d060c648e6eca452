//! The multi-rank equivalence check under MPI: start with `mpirun -np N mpi_equivalence N`.
//!
//! Every rank runs every optimizer × dtype × partition scheme of the thread-rank test; rank 0
//! compares the gathered table and states with one rank processing the union of the batches.
//! `mpi_equivalence N fail` instead makes rank 1 panic after creating its table, to show the job
//! ends with an error rather than hanging.

use rowshard::comm::mpi::MpiComm;
use rowshard::{Backend, Communicator, DType, Optimizer, PartitionScheme, ShardedTable, TABLE};
use rowshard_tests::equivalence::{cases, check, run_rank, spec};

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

    let mut count = 0;
    for table_row in TABLE {
        for dtype in DType::ALL {
            for case in cases(world, table_row.optimizer, dtype) {
                check(
                    &case,
                    run_rank(&comm, &case.spec, &case.steps).expect("rank"),
                );
                count += 1;
            }
        }
    }
    comm.barrier().expect("barrier");
    if comm.rank() == 0 {
        println!("mpi equivalence: {count} cases on {world} ranks equal one rank");
    }
}

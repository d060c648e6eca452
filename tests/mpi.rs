//! The equivalence check under `mpirun -np 2` and `-np 4`, and a failing rank ending the job.
//! The MPI program is the `mpi_equivalence` binary; the test harness itself never runs under
//! mpirun.

use std::process::Command;
use std::time::{Duration, Instant};

fn mpirun(np: usize, extra: &[&str]) -> (bool, String, Duration) {
    let start = Instant::now();
    let output = Command::new("timeout")
        .args([
            "300",
            "mpirun",
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            &np.to_string(),
        ])
        .arg(env!("CARGO_BIN_EXE_mpi_equivalence"))
        .arg(np.to_string())
        .args(extra)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .output()
        .expect("mpirun (apt-get install openmpi-bin)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text, start.elapsed())
}

#[test]
fn two_and_four_mpi_ranks_equal_one_rank() {
    for np in [2, 4] {
        let (ok, text, _) = mpirun(np, &[]);
        assert!(ok, "mpirun -np {np} failed:\n{text}");
        assert!(
            text.contains(&format!("on {np} ranks equal one rank")),
            "{text}"
        );
    }
}

#[test]
fn a_failing_mpi_rank_ends_the_job_with_an_error_within_seconds() {
    let (ok, text, elapsed) = mpirun(3, &["fail"]);
    assert!(!ok, "the job should fail:\n{text}");
    assert!(text.contains("rank 1 fails on purpose"), "{text}");
    assert!(!text.contains("was not stopped"), "{text}");
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
}

//! `rowshard train` under `mpirun -np 2`: the same binary, one rank per process, gives the same
//! metrics as two thread ranks. The test harness itself never runs under mpirun.

use std::process::Command;

fn metrics(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn two_mpi_processes_train_like_two_thread_ranks() {
    let dir = std::env::temp_dir().join(format!("rowshard-mpi-train-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let common = [
        "train",
        "--model",
        "complex",
        "--epochs",
        "4",
        "--batch-size",
        "512",
    ];
    let mpi_json = dir.join("mpi.json");
    let out = Command::new("timeout")
        .args([
            "300",
            "mpirun",
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            "2",
        ])
        .arg(env!("CARGO_BIN_EXE_rowshard"))
        .args(common)
        .args(["--metrics-json", mpi_json.to_str().unwrap()])
        .current_dir(root)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .output()
        .expect("mpirun (apt-get install openmpi-bin)");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mpirun failed:\n{text}");
    assert!(
        text.contains("2 ranks"),
        "not a world of 2 (wrong launcher?):\n{text}"
    );
    let threads_json = dir.join("threads.json");
    let out = Command::new(env!("CARGO_BIN_EXE_rowshard"))
        .args(common)
        .args([
            "--ranks",
            "2",
            "--metrics-json",
            threads_json.to_str().unwrap(),
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (mpi, threads) = (metrics(&mpi_json), metrics(&threads_json));
    for split in ["valid", "test"] {
        let (a, b) = (
            mpi[split]["mrr"].as_f64().unwrap(),
            threads[split]["mrr"].as_f64().unwrap(),
        );
        assert!((a - b).abs() <= 1e-9, "{split}: MPI {a}, threads {b}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

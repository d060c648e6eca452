//! rowshard's integration tests, one module per file and one binary for all of them: each test
//! binary links the runtimes (CubeCL, wgpu, LLVM), about 100 MB apiece, so one binary instead of
//! twelve saves a gigabyte of disk and a minute of linking. Kept apart: `steady_state` (its own
//! counting allocator), `snapshots` (insta names snapshots after the module path), `docs` and
//! `mpi` (small). Run one file's tests with `cargo test -p rowshard-tests --test integration
//! sharded::`.

#[cfg(feature = "cpu")]
mod cache;
#[cfg(feature = "cpu")]
mod checkpoints;
mod dense;
#[cfg(feature = "cpu")]
mod hygiene;
#[cfg(feature = "cpu")]
mod kernels_cpu;
#[cfg(feature = "cuda")]
mod kernels_cuda;
#[cfg(feature = "wgpu")]
mod kernels_wgpu;
#[cfg(feature = "cpu")]
mod local_table;
#[cfg(feature = "cpu")]
mod models;
#[cfg(feature = "wgpu")]
mod models_wgpu;
#[cfg(feature = "nccl")]
mod nccl;
#[cfg(feature = "cpu")]
mod sharded;
#[cfg(feature = "cpu")]
mod table_init;
#[cfg(feature = "cpu")]
mod training;

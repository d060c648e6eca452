#!/usr/bin/env bash
# The test command: formatting, lints, docs, and the whole test suite on both runtimes
# (CubeCL `cpu`, and `wgpu` on Vulkan — Mesa lavapipe where there is no GPU), thread ranks and
# MPI ranks (mpirun -np 2 and 4).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh

# Every test-crate feature that builds here: the cpu and wgpu runtimes, MPI, and NCCL and CUDA
# (compiled; without a GPU they refuse cleanly, which is tested).
features=(--workspace --features rowshard-tests/mpi,rowshard-tests/nccl,rowshard-tests/cuda,rowshard-cli/mpi,rowshard-cli/nccl,rowshard-cli/cuda,rowshard-cli/wgpu)

cargo fmt --all -- --check
cargo clippy "${features[@]}" --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc "${features[@]}" --no-deps --quiet
log=$(mktemp)
cargo test "${features[@]}" 2>&1 | tee "$log"
# One closing line over every test binary (cargo's own last line is the doc-tests' "0 passed").
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
rm -f "$log"

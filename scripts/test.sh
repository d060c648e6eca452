#!/usr/bin/env bash
# The test command: formatting, lints, docs, and the whole test suite on both runtimes
# (CubeCL `cpu`, and `wgpu` on Vulkan — Mesa lavapipe where there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
cargo test --workspace

#!/usr/bin/env bash
# The main job: what rowshard does best so far (see the README), on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
cargo run --release --quiet -p rowshard-cli -- demo "$@"

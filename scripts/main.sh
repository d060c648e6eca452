#!/usr/bin/env bash
# The main job: `rowshard train` — DistMult on the shipped UMLS, its entity table sharded over two
# thread ranks of the CubeCL cpu runtime, evaluated with filtered MRR and Hits@k (see the README).
# Any `rowshard train` flag passes through: bash scripts/main.sh --model complex --ranks 4
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
cargo run --release --quiet -p rowshard-cli -- train "$@"

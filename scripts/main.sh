#!/usr/bin/env bash
# The main job: `rowshard train` with the shipped ComplEx recipe (recipes/complex.toml: 1vsAll,
# softmax cross-entropy, N3, AdaGrad, early stopping on valid MRR) on the shipped UMLS, its entity
# table sharded over two thread ranks of the CubeCL cpu runtime, evaluated with filtered MRR and
# Hits@k (see the README). Any `rowshard train` flag passes through and overrides the recipe:
#   bash scripts/main.sh --model distmult --ranks 4
#   bash scripts/main.sh --dataset path/to/fb15k-237
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
cargo run --release --quiet -p rowshard-cli -- train --config recipes/complex.toml "$@"

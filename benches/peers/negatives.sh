#!/usr/bin/env bash
# Shared negatives against PyTorch-BigGraph, same session: the synthetic graph of a million
# entities (make_synthetic_kg.py), ComplEx dim 128, row-wise AdaGrad, softmax loss, 256 uniform
# negatives per chunk (both sides), batches of 1,000 edges, PBG with 2 Hogwild workers; then rowshard's
# `bench --suite negatives` on 1 and 2 thread ranks; and PyKEEN's sLCWA loop (16 independent
# negatives per triple; it cannot share them) on the same graph. Installs torchbiggraph 1.0.0
# (with h5py, attrs, tqdm and setuptools < 81, which it needs) and pykeen 1.11.1 into the peers
# venv. Not run by CI.
# Usage: bash benches/peers/negatives.sh [venv dir]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-${ROWSHARD_PEERS_VENV:-$HOME/.cache/rowshard-peers-venv}}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet torch numpy
fi
"$venv/bin/pip" install --quiet --no-deps torchbiggraph==1.0.0
"$venv/bin/pip" install --quiet h5py attrs tqdm "setuptools<81" "pykeen==1.11.1"
data=/tmp/synthetic_kg
[[ -f $data/train.txt ]] || "$venv/bin/python" "$here/make_synthetic_kg.py" "$data" \
  --entities 1000000 --relations 100 --train 2000000
# PBG's own timing line ("Processed N edges in S s") is the epoch without loading and saving.
OMP_NUM_THREADS=1 "$venv/bin/python" "$here/pbg_synthetic.py" "$data" --workers 2 2>&1 \
  | grep -E "Processed|^PBG:"
"$venv/bin/python" "$here/pykeen_slcwa.py" "$data" --threads 2 2>/dev/null
cd "$here/../.."
cargo run --release --quiet -p rowshard-cli -- bench --suite negatives --ranks 1,2 --steps 30 --rounds 3

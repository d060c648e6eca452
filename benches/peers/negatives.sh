#!/usr/bin/env bash
# Shared negatives against PyTorch-BigGraph, same session: the synthetic graph of a million
# entities (make_synthetic_kg.py), ComplEx dim 128, row-wise AdaGrad, softmax loss, 256 uniform
# negatives per chunk (both sides), batches of 1,000 edges, PBG with 2 Hogwild workers; then rowshard's
# `bench --suite negatives` on 1 and 2 thread ranks, whose table gives each case's ratio to
# PyTorch-BigGraph's own timing line; with ROWSHARD_PEERS_PYKEEN=1, PyKEEN's sLCWA loop (16
# independent negatives per triple; it cannot share them) on the same graph too. Installs
# torchbiggraph 1.0.0 (with h5py, attrs, tqdm and setuptools < 81, which it needs) and pykeen
# 1.11.1 into the peers venv. Not run by CI.
# Usage: bash benches/peers/negatives.sh [venv dir] [bench options, e.g. --record benches/results.json]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-${ROWSHARD_PEERS_VENV:-$HOME/.cache/rowshard-peers-venv}}"
shift || true
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
# PBG's own timing line ("Processed N edges in S s ( R M/sec )") is the epoch without loading
# and saving; its rate goes to rowshard's table as the ratio column.
log=$(mktemp)
OMP_NUM_THREADS=1 "$venv/bin/python" "$here/pbg_synthetic.py" "$data" --workers 2 2>&1 \
  | grep -E "Processed|^PBG:" | tee "$log"
pbg=$(sed -nE 's/.*Processed ([0-9]+) edges in ([0-9.]+) s \(.*/\1 \2/p' "$log" | tail -1 \
  | awk '{ printf "%.0f", $1 / $2 }')
rm -f "$log"
if [[ "${ROWSHARD_PEERS_PYKEEN:-0}" == 1 ]]; then
  "$venv/bin/python" "$here/pykeen_slcwa.py" "$data" --threads 2 2>/dev/null
fi
cd "$here/../.."
cargo run --release --quiet -p rowshard-cli -- bench --suite negatives --ranks 1,2 --steps 30 \
  --rounds 3 ${pbg:+--pbg-edges-per-s "$pbg"} "$@"

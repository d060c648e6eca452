#!/usr/bin/env bash
# The research-graph workload (docs/benchmarks.md) on FB15k-237, rowshard and its peers in one session,
# with the same thread count (the machine's cores):
#   1. torch's f32 matmul at the dense shapes, with and without losses    (torch_dense.py)
#      beside `rowshard bench-kernels --parts dense`
#   2. one KvsAll epoch of ComplEx dim 128, batch 1024: rowshard (2 thread ranks), dicee 0.3.3
#      (dicee_kge.py) and PyKEEN 1.11 LCWA (pykeen_lcwa.py); effective GFLOP/s
#   3. the plain PyTorch 1vsAll ComplEx-N3 trainer (kbc_n3.py) against rowshard's recipe
#      (recipes/complex.toml), both evaluating valid every epoch: time to valid MRR 0.33
# Installs the peers into a virtual environment first (torch, dicee, pykeen; ~5 GB; not run by
# CI). Usage: bash benches/peers/fb15k237.sh [venv dir] [data dir]   (from the repository root)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-${ROWSHARD_PEERS_VENV:-$HOME/.cache/rowshard-peers-venv}}"
data="${2:?usage: bash benches/peers/fb15k237.sh VENV_DIR FB15K237_FOLDER}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet torch==2.15.0 numpy "dicee==0.3.3" "pyarrow<22" pykeen==1.11.1
fi
py="$venv/bin/python"
threads=$(nproc)
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
cargo build --release --quiet -p rowshard-cli
rowshard=target/release/rowshard

echo "== 1. dense products: torch's matmul, then rowshard's kernels (interleaved twice)"
for round in 1 2; do
  "$py" "$here/torch_dense.py" --threads "$threads"
  "$rowshard" bench-kernels --parts dense --dtypes f32 --repeats 15
done

echo "== 2. one KvsAll epoch, ComplEx dim 128, batch 1024"
"$rowshard" train --dataset "$data" --model complex --dim 128 --mode kvsall --batch-size 1024 \
  --epochs 1 2>&1 | grep -E "epoch|trained"
OMP_NUM_THREADS=$threads "$py" "$here/dicee_kge.py" "$data" --model ComplEx --dim 128 --epochs 1 \
  --batch-size 1024 --scoring KvsAll --threads "$threads" --eval None
"$py" "$here/pykeen_lcwa.py" "$data" --dim 64 --threads "$threads"

echo "== 3. time to valid MRR 0.33: the plain PyTorch 1vsAll ComplEx-N3 trainer, then rowshard"
"$py" "$here/kbc_n3.py" "$data" --threads "$threads" --epochs 8 --eval-every 1
"$rowshard" train --config recipes/complex.toml --dataset "$data" --epochs 8 \
  --metrics-json /tmp/rowshard-complex-fb15k237.json 2>&1 | grep -E "epoch|valid|test"

#!/usr/bin/env bash
# Times rowshard's peers on the standard workload (DESIGN.md), on this machine's CPU:
#   - dicee 0.3.3 `RowWiseShardedEmbedding` + its sparse Adam (`_LocalSparseAdam`), gloo, 2 ranks
#   - torch `nn.Embedding(sparse=True)` + `torch.optim.SparseAdam`, one process
# Installs PyTorch and dicee from PyPI into a virtual environment (about 5 GB; not run by CI).
# Usage: bash benches/peers/run.sh [venv dir]   (then compare with `rowshard bench sharded`)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-${ROWSHARD_PEERS_VENV:-$HOME/.cache/rowshard-peers-venv}}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  # dicee 0.3.3 imports pyarrow, which must be older than 22 beside it.
  "$venv/bin/pip" install --quiet torch "dicee==0.3.3" "pyarrow<22"
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
"$venv/bin/python" "$here/torch_sparse_adam.py" "$@"
"$venv/bin/python" -m torch.distributed.run --standalone --nproc_per_node 2 "$here/dicee_sharded.py"

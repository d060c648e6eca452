#!/usr/bin/env bash
# Times rowshard's peers on the standard workload (docs/benchmarks.md), on this machine's CPU, each in its
# best configuration:
#   - dicee 0.3.3 `RowWiseShardedEmbedding` + its sparse Adam (`_LocalSparseAdam`), gloo, 2 ranks
#   - torch `nn.Embedding(sparse=True)` + `torch.optim.SparseAdam`, one process
# Every peer runs with each plausible thread count — for dicee's 2 ranks, cores/2 threads per rank
# (the fair share) and every other count up to the core count; for torch, 1 up to the cores —
# and the best figure of each case is reported with the setting that gave it.
# Installs PyTorch and dicee from PyPI into a virtual environment (about 5 GB; not run by CI).
# Usage: bash benches/peers/run.sh [venv dir]   (then compare with `rowshard bench`, same session)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-${ROWSHARD_PEERS_VENV:-$HOME/.cache/rowshard-peers-venv}}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  # dicee 0.3.3 imports pyarrow, which must be older than 22 beside it.
  "$venv/bin/pip" install --quiet torch "dicee==0.3.3" "pyarrow<22"
fi
cores=$(nproc)
log=$(mktemp)
for threads in $(seq 1 "$cores"); do
  OMP_NUM_THREADS=$threads "$venv/bin/python" "$here/torch_sparse_adam.py" \
    | sed "s/\$/ [threads=$threads]/" | tee -a "$log"
done
ranks=2
for threads in $(seq 1 $((cores / ranks > 0 ? cores : 1))); do
  OMP_NUM_THREADS=$threads "$venv/bin/python" -m torch.distributed.run --standalone \
    --nproc_per_node $ranks "$here/dicee_sharded.py" 2>/dev/null \
    | sed "s/\$/ [threads per rank=$threads]/" | tee -a "$log"
done
echo
echo "best of each case (fair share for dicee's $ranks ranks: $((cores / ranks > 0 ? cores / ranks : 1)) thread per rank):"
# Lines look like: "<system ...> <dtype> <ids> <M> M rows/s (...) [setting]"; keep each case's best.
python3 - "$log" <<'PY'
import re, sys
best = {}
for line in open(sys.argv[1]):
    m = re.match(r"(.*?)\s+(\S+)\s+rows/s.*\[(.*)\]", line.strip())
    if not m:
        continue
    head, _, setting = m.groups()
    parts = head.split()
    value = float(parts[-1])
    case = " ".join(parts[:-1])
    if case not in best or value > best[case][0]:
        best[case] = (value, setting)
for case, (value, setting) in best.items():
    print(f"{case:60} {value:.3f} M rows/s  [{setting}]")
PY
rm -f "$log"

#!/usr/bin/env python3
"""Adds (or replaces) a peer's figure beside a table of benches/results.json.

    python3 benches/peers/record.py TABLE_ID "PyTorch-BigGraph 1.0.0, 2 workers" "128 k edges/s" \
        "bash benches/peers/negatives.sh"

Then `bash scripts/benchmarks.sh` regenerates docs/benchmarks.md.
"""
import json
import pathlib
import sys

results = pathlib.Path(__file__).resolve().parents[1] / "results.json"
table_id, name, figure, command = sys.argv[1:5]
data = json.loads(results.read_text())
table = next((t for t in data["tables"] if t["id"] == table_id), None)
if table is None:
    sys.exit(f"record.py: no table `{table_id}` in {results}")
peers = [p for p in table.get("peers", []) if p["name"] != name]
peers.append({"name": name, "figure": figure, "command": command})
table["peers"] = peers
tmp = results.with_suffix(".json.tmp")
tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
tmp.replace(results)
print(f"record.py: {name} beside `{table_id}`")

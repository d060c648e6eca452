#!/usr/bin/env bash
# Regenerates docs/benchmarks.md from benches/results.json (the figures benches record with
# `--record`) and benches/page.md (the page around them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
ROWSHARD_BLESS=1 cargo test --quiet -p rowshard-cli --test docs

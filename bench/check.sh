#!/usr/bin/env bash
# Throughput and peak memory of `openmax --check --stdio` on ~1 GB of valid token lines,
# generated on the fly (nothing is written to disk). Prints MB/s and VmHWM.
# Usage: bench/check.sh [MB]   (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --release -p openmax-shell --example check_throughput -- "${1:-1000}"

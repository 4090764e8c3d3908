#!/usr/bin/env bash
# End-to-end bench of the release openmax binary against the sim's loopback mock:
# time to hello, 1-token turn, 2000-delta turn (CPU, wall, peak RSS), per-event latency at 1 ms
# spacing, --check MB/s; curl on the same streams as the floor; a grep tool call over a
# 100,000-file tree beside `rg` (when installed). Medians of RUNS runs.
#
#   bench/e2e.sh                     # every scenario, 10 runs
#   bench/e2e.sh --runs 3 --only hello,turn_2000 --json /tmp/e2e.json
#
# Arguments go to bench/e2e.py (see its --help). Needs python3 and curl (and rg for its row).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p openmax-shell --bin openmax
cargo build --quiet --release -p openmax-sim --example bench_mock
exec python3 bench/e2e.py "$@"

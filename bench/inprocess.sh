#!/usr/bin/env bash
# The in-process benchmarks (divan, release profile):
#   core:        token deltas through Core::handle/poll + Line::write_json; the validator in
#                MB/s over token lines; Transcript::capped over a long history
#   compaction:  request_tokens and compact over a 100,000-message transcript (time, bytes
#                allocated, peak RSS)
#   provider:    SSE decode, and decode + mapping, per API, in MB/s and deltas/s; --check's
#                in-process path in MB/s
# Usage: bench/inprocess.sh [divan args, e.g. a name filter]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p openmax-core --bench core -- "$@"
cargo bench -p openmax-core --bench compaction -- "$@"
cargo bench -p openmax-shell --bench provider -- "$@"

#!/usr/bin/env bash
# Run openmax side by side with Codex CLI, Claude Code and Gemini CLI on one loopback provider,
# using the shared harness in ../shared/bench-peers (copied to a scratch dir, since it writes its
# results beside itself), with openmax's two entries (bench/peers/*.json: -p and --stdio) added.
#
#   bench/peers.sh                       # perf suite, every peer, RUNS=10
#   SUITE=perf,faults PEERS=openmax,codex,curl-floor bench/peers.sh
#
# Knobs are run.sh's (PEERS_NODE, SUITE, PEERS, RUNS, WARMUP, SKIP_INSTALL, ...). The release
# binary is built first; OPENMAX_BIN overrides it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
shared="${BENCH_PEERS:-$root/../shared/bench-peers}"
[ -d "$shared" ] || { echo "peers.sh: no bench harness at $shared (set BENCH_PEERS)" >&2; exit 1; }

if [ -z "${OPENMAX_BIN:-}" ]; then
  (cd "$root" && cargo build --release -q --bin openmax)
  export OPENMAX_BIN="$root/target/release/openmax"
fi

work="${BENCH_DIR:-/tmp/openmax-bench-peers}"
rm -rf "$work"
mkdir -p "$work"
cp -r "$shared"/. "$work"/
chmod -R u+w "$work"
cp "$here"/peers/*.json "$work/peers.d/"
export SUITE="${SUITE:-perf}"
exec bash "$work/run.sh"

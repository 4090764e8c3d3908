#!/usr/bin/env bash
# The sandbox's cost per agent process: `true` and `bash -c true` spawned as the `shell` tool
# spawns them, plain, through the sandbox helper (openmax --sandbox-exec), through the
# read-only sandbox, and through bubblewrap with a comparable sandbox when `bwrap` is
# installed (apt-get install bubblewrap). p50/p90/p99 and what each adds over the plain spawn,
# samples taken in turn so the machine's noise weighs on all alike. Figures in
# docs/benchmarks.md. Argument: rounds (default 300). Run it as root and as a user: openmax
# needs no user namespace as root, and makes one otherwise.
#
# As in bench/tools.sh, fat LTO is off to keep the build short; set
# CARGO_PROFILE_RELEASE_LTO=true to measure the shipped profile.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-false}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"
export CARGO_PROFILE_BENCH_LTO="${CARGO_PROFILE_BENCH_LTO:-$CARGO_PROFILE_RELEASE_LTO}"
export CARGO_PROFILE_BENCH_CODEGEN_UNITS="${CARGO_PROFILE_BENCH_CODEGEN_UNITS:-$CARGO_PROFILE_RELEASE_CODEGEN_UNITS}"
cargo build -q --release -p openmax-shell --bin openmax
cargo bench -q -p openmax-shell --bench sandbox --no-run
OPENMAX_BIN="$PWD/target/release/openmax" exec cargo bench -q -p openmax-shell --bench sandbox -- "$@"

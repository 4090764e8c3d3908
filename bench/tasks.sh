#!/usr/bin/env bash
# Subagents (the `task` tool): the time from a `task` call to the child's first request at the
# loopback mock beside a bare `openmax --stdio` start in the same run, 8 tasks of one reply
# side by side, and the resident memory per child. Prints figures and ratios
# (docs/benchmarks.md, "Subagents"). Argument: runs (default 10).
#
# As in bench/sandbox.sh, fat LTO is off to keep the build short; set
# CARGO_PROFILE_RELEASE_LTO=true to measure the shipped profile.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-false}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"
cargo build --quiet --release -p openmax-shell --bin openmax
exec cargo run --quiet --release -p openmax-tests --bin openmax-bench-tasks -- "$@"

#!/usr/bin/env bash
# Checkpoints of a 10,000-file project: a checkpoint with nothing changed and with 100 files
# changed, the store's growth over 50 one-file turns, and an undo of 100 files. Prints figures
# (docs/benchmarks.md). Argument: rounds (default 20). BENCH_DIR picks the file system
# (default: the system temp directory; use a disk, not a tmpfs, for figures to record).
#
# As in bench/sandbox.sh, fat LTO is off to keep the build short; set
# CARGO_PROFILE_RELEASE_LTO=true to measure the shipped profile.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-false}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"
export CARGO_PROFILE_BENCH_LTO="${CARGO_PROFILE_BENCH_LTO:-$CARGO_PROFILE_RELEASE_LTO}"
export CARGO_PROFILE_BENCH_CODEGEN_UNITS="${CARGO_PROFILE_BENCH_CODEGEN_UNITS:-$CARGO_PROFILE_RELEASE_CODEGEN_UNITS}"
exec cargo bench -q -p openmax-shell --bench checkpoint -- "$@"

#!/usr/bin/env bash
# The kernel sandbox's cost per agent process (divan, release build): `bash -c true` spawned
# as the `shell` tool spawns it, plain, with an empty pre_exec (fork instead of posix_spawn),
# and confined (Landlock + seccomp, prepared once per session); and the per-session
# preparation. Figures in docs/benchmarks.md. Arguments go to divan (e.g. a name filter).
#
# As in bench/tools.sh, fat LTO is off to keep the build short; set
# CARGO_PROFILE_RELEASE_LTO=true to measure the shipped profile.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-false}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"
export CARGO_PROFILE_BENCH_LTO="${CARGO_PROFILE_BENCH_LTO:-$CARGO_PROFILE_RELEASE_LTO}"
export CARGO_PROFILE_BENCH_CODEGEN_UNITS="${CARGO_PROFILE_BENCH_CODEGEN_UNITS:-$CARGO_PROFILE_RELEASE_CODEGEN_UNITS}"
exec cargo bench -p openmax-shell --bench sandbox -- "$@"

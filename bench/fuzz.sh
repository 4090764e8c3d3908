#!/usr/bin/env bash
# The in-process mutation fuzzers (shell/tests/fuzz/targets.rs) on the stable toolchain, each
# target for INPUTS mutated inputs (default 1,000,000): stdin framing + command parsing, the SSE
# decoder, the three provider mappers behind it (arbitrary bytes, arbitrary chunking), the
# config parser, the session record reader. Prints inputs, failures (panics or broken
# properties) and inputs per second per target; exits 1 when anything failed. Figures in
# docs/benchmarks.md. Usage: bench/fuzz.sh [INPUTS] [SEED]
#
# As in bench/tools.sh, fat LTO is off to keep the build short.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-false}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"
exec cargo run --release -q -p openmax-shell --example fuzz -- "${1:-1000000}" "${2:-1}"

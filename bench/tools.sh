#!/usr/bin/env bash
# Time the built-in `glob` and `grep` on a generated 100,000-file tree against `rg` (when
# installed), in a release build. Arguments go to the example: [--runs N] [--dir DIR] [--only glob|grep].
#
# The release profile's fat LTO is turned off here to keep the build short; set
# CARGO_PROFILE_RELEASE_LTO=true to measure the shipped profile.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-false}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}"
exec cargo run --quiet --release -p openmax-shell --example tools_bench -- "$@"

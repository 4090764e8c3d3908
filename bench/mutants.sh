#!/usr/bin/env bash
# Mutation testing of the turn machine with cargo-mutants: every mutant of core/src/machine/
# and core/src/compaction.rs is built and judged by the core's unit tests and the simulator's
# tests (the hand-written and regression scenarios, and the quickcheck properties). Too slow
# for CI on 2 cores, so it is sharded: run shard K of N (default 0/1, the whole set).
#
#   bench/mutants.sh            # everything (hours on 2 cores)
#   bench/mutants.sh 0 40       # shard 0 of 40
#   bench/mutants.sh --list     # only list the mutants
#   JOBS=2 bench/mutants.sh     # two mutants at a time (each in its own copy of the tree)
#
# The oracle first runs once on the unmutated tree, here (SKIP_ORACLE_CHECK=1 to skip): a
# broken oracle (a test that fails anyway, a bad test argument) would otherwise count every
# mutant as caught. (cargo-mutants' own baseline tests only the mutated package, where the
# simulator's test targets do not exist, so it is skipped.)
#
# cargo-mutants is installed into target/tools/ when missing. Results: target/mutants/<k>-of-<n>/
# (mutants.out/caught.txt, missed.txt, timeout.txt, unviable.txt). Account for every entry of
# missed.txt in docs/testing.md: a property that kills it, or why it is equivalent.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tools=$root/target/tools
if ! command -v cargo-mutants >/dev/null 2>&1 && [ ! -x "$tools/bin/cargo-mutants" ]; then
  cargo install --locked cargo-mutants --root "$tools"
fi
export PATH=$tools/bin:$PATH
files=(-f 'core/src/machine/*.rs' -f core/src/compaction.rs -e 'core/src/machine/tests/**')
if [ "${1:-}" = "--list" ]; then
  exec cargo mutants --package openmax-core "${files[@]}" --list
fi
k=${1:-0}
n=${2:-1}
mkdir -p "$root/target/mutants"
# The oracle: the core's unit tests and wire tests, the simulator's unit tests, scenarios with
# their goldens, properties, context receipts and CLI. Named test targets, so the mock-server
# tests (the HTTP mock, not the machine) are not even built. cargo-mutants hands everything
# after its own `--` to `cargo test`; the second `--` passes `--skip mock_` on to the test
# binaries (one `--` gives `cargo test --skip`, which cargo rejects, so every mutant "fails").
tests=(--lib --test corpus --test pairing --test wire_golden
  --test golden --test properties --test context_receipts --test core_purity --test cli)
if [ -z "${SKIP_ORACLE_CHECK:-}" ]; then
  cargo test -p openmax-core -p openmax-sim "${tests[@]}" -- --skip mock_ >"$root/target/mutants/oracle-check.log" 2>&1 || {
    echo "the oracle fails on the unmutated tree: see target/mutants/oracle-check.log" >&2
    exit 1
  }
fi
cargo mutants --package openmax-core "${files[@]}" \
  --shard "$k/$n" --baseline skip --timeout 300 --build-timeout 1200 \
  --jobs "${JOBS:-1}" \
  --test-package openmax-core --test-package openmax-sim \
  --output "$root/target/mutants/$k-of-$n" \
  -- "${tests[@]}" -- --skip mock_ 2>&1 | tee "$root/target/mutants/$k-of-$n.log"
out=$root/target/mutants/$k-of-$n/mutants.out
caught=$(wc -l <"$out/caught.txt")
missed=$(wc -l <"$out/missed.txt")
timeout=$(wc -l <"$out/timeout.txt")
unviable=$(wc -l <"$out/unviable.txt")
viable=$((caught + missed + timeout))
echo "shard $k/$n: caught $caught, missed $missed, timeout $timeout, unviable $unviable"
echo "score (caught + timeout) / viable: $((caught + timeout)) / $viable"

#!/usr/bin/env bash
# Mutation testing of the turn machine with cargo-mutants: every mutant of core/src/machine/
# and core/src/compaction.rs is judged by the oracle: the core's unit and wire tests and the
# simulator's tests (its unit tests, the hand-written and regression scenarios with their
# goldens, the quickcheck properties, the context receipts and the CLI). Too slow for CI on
# 2 cores, so it can be sharded: shard K of N (default 0/1, the whole set).
#
#   bench/mutants.sh            # everything (hours on 2 cores)
#   bench/mutants.sh 0 40       # shard 0 of 40
#   bench/mutants.sh --list     # only list the mutants
#   bench/mutants.sh --recheck FILE   # only the mutants named in FILE (one per line, as in
#                                     # missed.txt), against the whole oracle
#   JOBS=2 bench/mutants.sh     # two mutants at a time (each in its own copy of the tree)
#
# Two passes, so most mutants cost one build of the core alone:
# 1. `unit`: every mutant against the core's unit tests (`cargo test -p openmax-core --lib`).
#    What they catch, the oracle catches.
# 2. `full`: each survivor of pass 1 against the whole oracle (core and simulator tests, the
#    mock-server tests left out: they exercise the HTTP mock, not the machine). Before it, the
#    oracle runs once on the unmutated tree here: a broken oracle (a test that fails anyway, a
#    bad test argument) would otherwise count every mutant as caught. (cargo-mutants' own
#    baseline tests only the mutated package, where the simulator's targets do not exist.)
#
# cargo-mutants is installed into target/tools/ when missing. Results in target/mutants/K-of-N/:
# unit/mutants.out and full/mutants.out (caught.txt, missed.txt, timeout.txt, unviable.txt
# each), and missed.txt: the survivors of both passes. Account for every one of them in
# docs/testing.md: a property that kills it, or why it is equivalent.
# shellcheck source=bench/cargo-mutants-tool.sh
source "$(dirname "$0")/cargo-mutants-tool.sh"
files=(-f 'core/src/machine/*.rs' -f core/src/compaction.rs -e 'core/src/machine/tests/**')
if [ "${1:-}" = "--list" ]; then
  exec cargo mutants --package openmax-core "${files[@]}" --list
fi
common=(--package openmax-core "${files[@]}" --build-timeout 3600 --jobs "${JOBS:-1}")

# The whole oracle, by test target (so the mock-server tests are not even built).
# cargo-mutants hands everything after its own `--` to `cargo test`; the second `--` passes
# `--skip mock_` on to the test binaries (with one `--`, `cargo test --skip` is rejected and
# every mutant "fails").
tests=(--lib --test corpus --test pairing --test wire_golden
  --test golden --test properties --test context_receipts --test core_purity --test cli)

# full_pass LIST OUT: every mutant named in LIST against the whole oracle, results in OUT.
full_pass() {
  local list=$1 dir=$2 left=()
  while IFS= read -r m; do
    [ -n "$m" ] && left+=(-F "^$(printf '%s' "$m" | sed 's/[][\.|$(){}?+*^]/\\&/g')\$")
  done <"$list"
  mkdir -p "$dir/mutants.out"
  : >"$dir/mutants.out/caught.txt"
  : >"$dir/mutants.out/missed.txt"
  : >"$dir/mutants.out/timeout.txt"
  [ ${#left[@]} -gt 0 ] || return 0
  echo "== the whole oracle: $((${#left[@]} / 2)) mutants"
  cargo test -p openmax-core -p openmax-sim "${tests[@]}" -- --skip mock_ >"$dir.oracle-check.log" 2>&1 || {
    echo "the oracle fails on the unmutated tree: see $dir.oracle-check.log" >&2
    exit 1
  }
  capped cargo mutants "${common[@]}" "${left[@]}" --baseline skip --timeout "${TEST_TIMEOUT:-300}" \
    --test-package openmax-core --test-package openmax-sim --output "$dir" \
    -- "${tests[@]}" -- --skip mock_ 2>&1 | tee "$dir.log" || true
  if grep -q '^ERROR' "$dir.log"; then
    echo "the oracle run did not run: see $dir.log" >&2
    exit 1
  fi
}

if [ "${1:-}" = "--recheck" ]; then
  out=$root/target/mutants/recheck
  rm -rf "$out"
  mkdir -p "$out"
  full_pass "$(realpath "$2")" "$out/full"
  f=$out/full/mutants.out
  echo "recheck: caught $(wc -l <"$f/caught.txt"), timeout $(wc -l <"$f/timeout.txt"), missed $(wc -l <"$f/missed.txt")"
  cat "$f/missed.txt"
  exit 0
fi

k=${1:-0}
n=${2:-1}
out=$root/target/mutants/$k-of-$n
mkdir -p "$out"

echo "== pass 1: the core's unit tests"
capped cargo mutants "${common[@]}" --shard "$k/$n" --baseline run --timeout 300 \
  --test-package openmax-core --output "$out/unit" -- --lib 2>&1 | tee "$out/unit.log" || true
if grep -q '^ERROR' "$out/unit.log" || [ ! -f "$out/unit/mutants.out/missed.txt" ]; then
  echo "pass 1 did not run: see $out/unit.log" >&2
  exit 1
fi

echo "== pass 2: the survivors against the whole oracle"
full_pass "$out/unit/mutants.out/missed.txt" "$out/full"
u=$out/unit/mutants.out
f=$out/full/mutants.out
cp "$f/missed.txt" "$out/missed.txt"
caught=$(cat "$u/caught.txt" "$f/caught.txt" | wc -l)
missed=$(wc -l <"$f/missed.txt")
timeout=$(cat "$u/timeout.txt" "$f/timeout.txt" | wc -l)
unviable=$(wc -l <"$u/unviable.txt")
viable=$((caught + missed + timeout))
echo "shard $k/$n: caught $caught (by the unit tests $(wc -l <"$u/caught.txt")), missed $missed, timeout $timeout, unviable $unviable"
echo "score (caught + timeout) / viable: $((caught + timeout)) / $viable"

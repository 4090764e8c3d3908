#!/usr/bin/env bash
# Which mutants of the policy sets (bench/mutants-policy.sh core and shell) sit on a line no
# test runs. Such a mutant survives every mutation run for certain, and this finds them all in
# one run of the whole suite (about 35 minutes on a 2-core machine) where mutation runs can only
# sample the set.
#
# How: the workspace is built with `-C instrument-coverage` in a scratch worktree
# (target/coverage-policy/tree, the current commit with the working tree's changes), where,
# and only there, the places that clear a child's environment (the test harness, the tmux pane,
# the sandbox's command and probe) let `LLVM_PROFILE_FILE` through; every process of the suite
# adds its counters to target/coverage-policy/profiles; llvm-profdata merges them and llvm-cov
# exports lcov, which is read against the mutants' lines.
#
# Blind spot: the sandbox helper's own processes (the first process execs the command, and the
# helper runs where the profile directory is not writable), so a mutant under
# shell/src/sandbox/helper/ listed here may still be caught end to end; every other one listed
# is a test to write or dead code to remove. Two tests of the scratch tree fail by design (they
# check the exact environment a child gets, which now holds LLVM_PROFILE_FILE).
#
#   bench/coverage-policy.sh                 # build, run the suite, report
#   REPORT_ONLY=1 bench/coverage-policy.sh   # report again from the last run's counters
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/target/coverage-policy
tree=$out/tree
profiles=$out/profiles
sysroot=$(rustc --print sysroot)
tools=$(echo "$sysroot"/lib/rustlib/*/bin)
if [ ! -x "$tools/llvm-profdata" ]; then
  rustup component add llvm-tools
fi

if [ -z "${REPORT_ONLY:-}" ]; then
  mkdir -p "$out"
  if [ ! -d "$tree" ]; then
    git worktree add -q --detach "$tree" HEAD
  fi
  git -C "$tree" checkout -q -- .
  git -C "$tree" checkout -q --detach "$(git rev-parse HEAD)"
  git diff HEAD | (cd "$tree" && git apply --allow-empty)
  # The components the tests install (tmux, MCP servers, the ACP client) are reused.
  if [ -d target/test-deps ] && [ ! -d "$tree/target/test-deps" ]; then
    mkdir -p "$tree/target"
    cp -a target/test-deps "$tree/target/"
  fi
  rm -rf "$profiles"
  mkdir -p "$profiles"
  # Processes of the ordinary test user write here too.
  chmod 1777 "$profiles"
  pattern=$profiles/%8m.profraw
  (
    cd "$tree"
    grep -rl --include='*.rs' 'env_clear()' tests shell/src |
      xargs sed -i "s|\.env_clear()|.env_clear().env(\"LLVM_PROFILE_FILE\", \"$pattern\")|g"
    sed -i "s|(\"TERM\".into(), \"tmux-256color\".into()),|&\n            (\"LLVM_PROFILE_FILE\".into(), \"$pattern\".into()),|" \
      tests/src/tmux.rs
    export RUSTFLAGS="-C instrument-coverage" LLVM_PROFILE_FILE=$pattern
    cargo build -q --workspace --all-targets
    cargo build -q -p openmax-shell --bin openmax --features panic-trigger
    cargo test -q --workspace --no-fail-fast 2>&1 | grep -E '^test result|FAILED' || true
  )
fi

"$tools/llvm-profdata" merge -sparse "$profiles"/*.profraw -o "$out/merged.profdata"
objects=()
for f in "$tree"/target/debug/deps/*; do
  if [ -f "$f" ] && [ -x "$f" ] && head -c 4 "$f" | grep -q 'ELF'; then
    objects+=("-object=$f")
  fi
done
"$tools/llvm-cov" export -format=lcov -instr-profile="$out/merged.profdata" \
  "$tree/target/debug/openmax" "${objects[@]}" \
  -ignore-filename-regex='/.cargo/registry|/rustc/' >"$out/lcov.info" 2>"$out/llvm-cov.log"

for set in core shell; do
  bench/mutants-policy.sh "$set" --list >"$out/$set-mutants.txt"
  # Per line, the sum over every object that holds it; a mutant's line is "ran", "never"
  # (a counted line no test reached) or "none" (no counter: a declaration, a macro).
  awk -v tree="$tree/" '
    FNR == NR {
      if ($0 ~ /^SF:/) { file = substr($0, 4); sub("^" tree, "", file) }
      else if ($0 ~ /^DA:/) { split(substr($0, 4), d, ","); hits[file ":" d[1]] += d[2]; seen[file ":" d[1]] = 1 }
      next
    }
    {
      split($0, p, ":"); key = p[1] ":" p[2]
      if (!(key in seen)) { none++; print "no counter\t" $0 > "/dev/stderr" }
      else if (hits[key] == 0) { never++; print "never ran\t" $0 }
      else ran++
    }
    END { printf "%d mutants: %d on lines that ran, %d on lines no test ran, %d on lines with no counter\n", ran + never + none, ran, never, none > "/dev/stderr" }
  ' "$out/lcov.info" "$out/$set-mutants.txt" 2>"$out/$set-summary.txt" >"$out/$set-never.txt"
  echo "== $set: $(tail -n 1 "$out/$set-summary.txt")"
  echo "   outside the sandbox helper, on lines no test ran:"
  grep -v 'sandbox/helper/' "$out/$set-never.txt" | cut -f2 | sed 's/^/   /' || true
  echo "   (every one: $out/$set-never.txt; no counter: $out/$set-summary.txt)"
done

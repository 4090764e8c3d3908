#!/usr/bin/env bash
# Re-apply hand-made bugs to the core, one at a time, and report which simulator properties
# catch each (or SURVIVED). Every bench/bugs/*.patch (or the ones named) is applied to a
# scratch worktree of HEAD under target/bugs/, the simulator is built there (its own target
# dir, so this checkout's binaries are untouched), and `openmax-sim explore` runs CASES
# generated cases (default 5000, seed 0). Each full explore output, with the shrunk
# counterexample of every violated property, is kept as target/bugs/<name>.txt.
#
#   bench/bugs.sh                      # every patch
#   CASES=20000 bench/bugs.sh bench/bugs/token-cap-off-by-one.patch
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cases=${CASES:-5000}
scratch=$root/target/bugs
wt=$scratch/wt
mkdir -p "$scratch"
export CARGO_TARGET_DIR=$scratch/target
git worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
git worktree prune
git worktree add --detach -q "$wt" HEAD
trap 'git -C "$root" worktree remove --force "$wt" 2>/dev/null || true' EXIT

patches=("$@")
if [ ${#patches[@]} -eq 0 ]; then
  patches=("$root"/bench/bugs/*.patch)
fi
printf '%-44s %s\n' "bug" "caught by (explore, $cases cases, seed 0)"
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  git -C "$wt" checkout -q -- .
  git -C "$wt" apply "$(realpath "$p")"
  # The build's warnings (a patch may leave a variable unused) go to a log, not the table.
  if ! (cd "$wt" && cargo build -q -p openmax-sim --bin openmax-sim) 2>"$scratch/$name.build.log"; then
    cat "$scratch/$name.build.log" >&2
    exit 1
  fi
  out=$scratch/$name.txt
  "$CARGO_TARGET_DIR"/debug/openmax-sim explore --seed 0 --cases "$cases" --jobs 2 >"$out" 2>&1 || true
  line=$(grep '^explored' "$out" || echo "explore did not finish")
  if grep -q '0 properties violated' <<<"$line"; then
    printf '%-44s %s\n' "$name" "SURVIVED"
  else
    caught=$(sed -n 's/.*properties violated (\(.*\))$/\1/p' <<<"$line")
    shrunk=$(grep '^== counterexample' "$out" | sed -n 's/.*for \([a-z_]*\) (seed [0-9]*, case \([0-9]*\), shrunk from \([0-9]*\) to \([0-9]*\) steps)/\1: case \2, \3->\4 steps/p' | paste -sd';' -)
    printf '%-44s %s\n' "$name" "${caught:-$line}"
    printf '%-44s %s\n' "" "  shrunk: $shrunk"
  fi
done

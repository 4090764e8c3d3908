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
# The sandbox's first process ends inside the sandbox, where the profile directory is not
# writable: in the scratch tree, and only there, it hands its counters to the helper through a
# memfd made before the clone (bench/coverage/profile_relay.rs, copied into the helper), and
# the helper, which writes its own at exit, keeps the larger of each. The profile directory's
# default ACL makes every profile file writable by all (openmax refuses a world-writable
# $OPENMAX_HOME, so a umask cannot do it), so that the processes of the ordinary test user add
# to the files root's made. Still unseen: what runs between a fork and its exec (PROGRAM's
# child before it becomes PROGRAM) and processes killed rather than ended. Every mutant listed
# is a test to write, dead code to remove or an equivalent to argue. One test of the scratch
# tree fails by design (it checks the exact environment a child gets, which there holds
# LLVM_PROFILE_FILE).
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

# `insert FILE PATTERN WHERE TEXT`: TEXT put before (after the indentation) or after the one
# line of FILE that matches PATTERN, on that same line, so that every line keeps its number
# (the mutants' lines are read against the counters by number); fails, naming it, unless
# exactly one line matches.
insert() {
  local file=$1 pattern=$2 where=$3 text=$4
  if [ "$(grep -c -- "$pattern" "$file")" != 1 ]; then
    echo "coverage-policy: not exactly one line of $file matches $pattern" >&2
    exit 1
  fi
  awk -v p="$pattern" -v w="$where" -v t="$text" '
    $0 ~ p && w == "before" { match($0, /^ */); $0 = substr($0, 1, RLENGTH) t " " substr($0, RLENGTH + 1) }
    $0 ~ p && w == "after" { $0 = $0 " " t }
    { print }' "$file" >"$file.new"
  mv "$file.new" "$file"
}

# `relay DIR`: the sandbox's first process hands its counters to the helper (see above;
# bench/coverage/profile_relay.rs is copied into DIR).
relay() {
  local dir=$1
  cp "$root/bench/coverage/profile_relay.rs" "$dir/profile_relay.rs"
  insert "$dir/mod.rs" '^pub mod privileges;$' after 'pub mod profile_relay;'
  insert "$dir/mod.rs" '^    let pid = clone_init[(]' before 'profile_relay::open();'
  insert "$dir/mod.rs" '^    let status = reap[(]pid[)];$' after 'profile_relay::absorb();'
  insert "$dir/init.rs" '^    std::process::exit[(]code[)]$' before 'super::profile_relay::emit();'
}

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
  # Processes of the ordinary test user write here too, into files root's made.
  chmod 1777 "$profiles"
  if ! command -v setfacl >/dev/null; then
    apt-get install -y -qq acl >/dev/null || {
      echo "coverage-policy: setfacl is missing and apt-get could not install acl" >&2
      exit 1
    }
  fi
  setfacl -d -m u::rw,g::rw,o::rw "$profiles"
  pattern=$profiles/%8m.profraw
  (
    cd "$tree"
    grep -rl --include='*.rs' 'env_clear()' tests shell/src |
      xargs sed -i "s|\.env_clear()|.env_clear().env(\"LLVM_PROFILE_FILE\", \"$pattern\")|g"
    sed -i "s|(\"TERM\".into(), \"tmux-256color\".into()),|&\n            (\"LLVM_PROFILE_FILE\".into(), \"$pattern\".into()),|" \
      tests/src/tmux.rs
    relay shell/src/sandbox/helper
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

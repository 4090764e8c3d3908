#!/usr/bin/env bash
# Mutation testing of the policy code above the machine with cargo-mutants: the permission
# rules (core/src/permissions) and the shell's policy directories (config, sandbox, the human
# check, extensions, hooks, mcp, ACP's translation, the session store, the providers). Every
# mutant is judged in two passes, like bench/mutants.sh for the machine:
# 1. `unit`: the package's own tests (the core's unit tests and its shell-rule properties
#    against quickcheck and the real bash; the shell's unit tests and its session, provider and
#    tool integration tests).
# 2. `full`: each survivor against the end-to-end tests that exercise that policy through the
#    real binary (config, secrets, sessions, sandbox and boundary attacks, MCP, hooks,
#    extensions, providers, ACP).
# Too slow for CI on 2 cores (3,300 mutants; a shell mutant costs a build of the shell and of
# the binary): run it sharded. Shard K of N takes every N-th mutant (round-robin), so one shard
# is a systematic sample of the whole set; SHARDING=slice takes the K-th consecutive range
# instead (one file's neighbourhood); SHARDING=fresh draws only from the mutants no earlier run
# here judged (below).
#
#   bench/mutants-policy.sh core 0 20     # shard 0 of 20 of core/src/permissions
#   bench/mutants-policy.sh shell 0 100   # shard 0 of 100 of the shell's policy code
#   bench/mutants-policy.sh core --list   # list the mutants
#   PASSES=unit bench/mutants-policy.sh shell 1 8   # pass 1 only
#
# It mutates the checkout in place (see `common` below): leave the tree alone while it runs.
#
# cargo-mutants is installed into target/tools/ when missing. Results in
# target/mutants-policy/<set>-K-of-N/ (unit/ and full/ with cargo-mutants' caught.txt,
# missed.txt, timeout.txt, unviable.txt; missed.txt: the survivors of both passes). Every
# mutant pass 1 judged is also added to bench/mutants-judged/<set>.tsv (its outcome, a tab,
# its name), which is committed: target/ does not outlive a machine, and SHARDING=fresh needs
# to know what was judged.
# shellcheck source=bench/cargo-mutants-tool.sh
source "$(dirname "$0")/cargo-mutants-tool.sh"

set_name=${1:?usage: bench/mutants-policy.sh core|shell [K N | --list]}
case "$set_name" in
  core)
    package=openmax-core
    files=(-f 'core/src/permissions/**')
    unit=(--lib --test shell_rules_props --test shell_rules_bash)
    e2e=(--test shell_rules_e2e --test secrets_e2e --test escalation_e2e --test tool_hooks_e2e)
    ;;
  shell)
    package=openmax-shell
    files=(-f 'shell/src/config/**' -f 'shell/src/sandbox/**' -f shell/src/human.rs
      -f 'shell/src/extensions/**' -f 'shell/src/hooks/**' -f 'shell/src/mcp/**'
      -f shell/src/frontend/acp/translate.rs -f 'shell/src/session/**' -f 'shell/src/provider/**')
    unit=(--lib --test session_crash --test session_lock --test session_state
      --test session_store --test provider_mock --test provider_raw --test provider_render
      --test tools_shell)
    e2e=(--test cli --test secrets_e2e --test sessions_e2e --test sessions_find_e2e
      --test sessions_order_e2e --test sandbox_e2e --test sandbox_layers_e2e --test host_e2e
      --test boundary_e2e --test escalation_e2e --test mcp_e2e --test hooks --test extensions
      --test providers --test provider_errors --test peers_config_e2e
      --test peers_provider_e2e --test acp_e2e --test shell_rules_e2e --test mcp_resources_e2e
      --test mcp_scripted --test reload --test acp_sessions --test stream_integrity
      --test stream_bounds --test tool_hooks_e2e --test tool_limits_e2e
      --test tasks_agents_e2e)
    ;;
  *)
    echo "unknown set $set_name: core or shell" >&2
    exit 2
    ;;
esac
if [ "${2:-}" = "--list" ]; then
  exec cargo mutants --package "$package" "${files[@]}" --list
fi
k=${2:-0}
n=${3:-1}
out=$root/target/mutants-policy/$set_name-$k-of-$n
ledger=$root/bench/mutants-judged/$set_name.tsv
rm -rf "$out"
mkdir -p "$out"
# In place, not in cargo-mutants' scratch copy: that copy lives in the system temp directory,
# which the sandbox replaces with the session's own, so the end-to-end tests that run openmax
# inside the sandbox (a nested openmax) would fail for every mutant and count it as caught.
# So the tree must not be edited while a run goes, and one run at a time per checkout.
common=(--package "$package" "${files[@]}" --build-timeout 3600 --in-place)
shard=(--shard "$k/$n" --sharding "${SHARDING:-round-robin}")
# SHARDING=fresh: shard K of N (round-robin) of the mutants no earlier run of this set judged,
# by name, from the results under target/mutants-policy/. The list shifts as code is added,
# so a round-robin shard drawn later can repeat much of an earlier one (7 and 8 of 16 of the
# shell set shared 80 mutants).
if [ "${SHARDING:-}" = fresh ]; then
  cargo mutants --package "$package" "${files[@]}" --list >"$out/all.txt"
  {
    cat "$root"/target/mutants-policy/"$set_name"-*/unit/mutants.out/{caught,missed,timeout,unviable}.txt \
      2>/dev/null || true
    cut -f2- "$ledger" 2>/dev/null || true
  } | sort -u >"$out/judged.txt"
  grep -vxF -f "$out/judged.txt" "$out/all.txt" | awk -v k="$k" -v n="$n" '(NR - 1) % n == k' \
    >"$out/fresh.txt"
  echo "$(wc -l <"$out/all.txt") mutants, $(wc -l <"$out/judged.txt") judged before; shard $k of $n of the rest: $(wc -l <"$out/fresh.txt")"
  shard=()
  while IFS= read -r m; do
    shard+=(-F "^$(printf '%s' "$m" | sed 's/[][\.|$(){}?+*^]/\\&/g')\$")
  done <"$out/fresh.txt"
  # cargo-mutants lets its "delete field" mutants past -F and a name's -E alike: when one was
  # drawn, every such mutant of the set comes along (about five in the shell set), judged
  # before or not.
  grep -q 'delete field' "$out/fresh.txt" || shard+=(-E 'delete field')
fi

# The test selection as cargo arguments, so that the build of each mutant builds only these
# test binaries too (arguments after `--` reach only the test run).
unit_args=()
for a in "${unit[@]}"; do unit_args+=("--cargo-arg=$a"); done
e2e_args=()
for a in "${e2e[@]}"; do e2e_args+=("--cargo-arg=$a"); done

echo "== pass 1: $package's own tests"
# A mutant that makes a test loop forever is a timeout (caught): the limit is five times the
# unmutated run's, at least two minutes (about ten times that run on a loaded 2-core machine),
# unless TEST_TIMEOUT sets it.
unit_timeout=(--timeout-multiplier 5 --minimum-test-timeout 120)
[ -n "${TEST_TIMEOUT:-}" ] && unit_timeout=(--timeout "$TEST_TIMEOUT")
capped cargo mutants "${common[@]}" "${shard[@]}" --baseline run "${unit_timeout[@]}" \
  --test-package "$package" --output "$out/unit" "${unit_args[@]}" 2>&1 |
  tee "$out/unit.log" || true
u=$out/unit/mutants.out
if grep -q '^ERROR' "$out/unit.log" || [ ! -f "$u/missed.txt" ]; then
  echo "pass 1 did not run: see $out/unit.log" >&2
  exit 1
fi
mkdir -p "$(dirname "$ledger")"
touch "$ledger"
# The newest outcome of a name stands (sort -s keeps the first of equal names: this run's).
for outcome in caught missed timeout unviable; do
  sed "s/^/$outcome\t/" "$u/$outcome.txt"
done | cat - "$ledger" | sort -s -t$'\t' -k2 -u >"$ledger.new"
mv "$ledger.new" "$ledger"
echo "pass 1's outcomes added to ${ledger#"$root"/} (commit it)"

if [ "${PASSES:-both}" = unit ]; then
  # Pass 1 only: the survivors are judged one by one (read, then killed by a test, shown
  # equivalent, or run against the end-to-end test that covers them).
  echo "$set_name shard $k/$n, pass 1 only: caught $(wc -l <"$u/caught.txt"), missed $(wc -l <"$u/missed.txt"), timeout $(wc -l <"$u/timeout.txt"), unviable $(wc -l <"$u/unviable.txt")"
  cat "$u/missed.txt"
  exit 0
fi

echo "== pass 2: the survivors against the end-to-end tests"
left=()
fields=0
while IFS= read -r m; do
  [ -n "$m" ] || continue
  left+=(-F "^$(printf '%s' "$m" | sed 's/[][\.|$(){}?+*^]/\\&/g')\$")
  case "$m" in *"delete field"*) fields=1 ;; esac
done <"$u/missed.txt"
# cargo-mutants lets its "delete field" mutants past -F: leave them out unless one survived.
skip=()
[ $fields = 0 ] && skip=(-E 'delete field')
f=$out/full/mutants.out
mkdir -p "$f"
: >"$f/caught.txt"
: >"$f/missed.txt"
: >"$f/timeout.txt"
if [ ${#left[@]} -gt 0 ]; then
  cargo test -p openmax-tests "${e2e[@]}" >"$out/oracle-check.log" 2>&1 || {
    echo "the end-to-end oracle fails on the unmutated tree: see $out/oracle-check.log" >&2
    exit 1
  }
  # The tests run the openmax binary, which `cargo test -p openmax-tests` does not rebuild:
  # this makes the harness build it (with the mutant) in each test process.
  OPENMAX_TEST_REBUILD=1 \
    cargo mutants "${common[@]}" "${left[@]}" "${skip[@]}" --baseline skip \
    --timeout "${TEST_TIMEOUT:-900}" \
    --test-package openmax-tests --output "$out/full" "${e2e_args[@]}" 2>&1 |
    tee "$out/full.log" || true
fi
cp "$f/missed.txt" "$out/missed.txt"
caught=$(cat "$u/caught.txt" "$f/caught.txt" | wc -l)
missed=$(wc -l <"$f/missed.txt")
timeout=$(cat "$u/timeout.txt" "$f/timeout.txt" | wc -l)
unviable=$(wc -l <"$u/unviable.txt")
viable=$((caught + missed + timeout))
echo "$set_name shard $k/$n: caught $caught (by $package's own tests $(wc -l <"$u/caught.txt")), missed $missed, timeout $timeout, unviable $unviable"
echo "score (caught + timeout) / viable: $((caught + timeout)) / $viable"
cat "$out/missed.txt"

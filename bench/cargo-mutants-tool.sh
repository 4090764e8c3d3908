# Sourced by the mutation scripts: run from the repository root, with cargo-mutants on PATH
# (installed into target/tools/ when missing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
tools=$root/target/tools
if ! command -v cargo-mutants >/dev/null 2>&1 && [ ! -x "$tools/bin/cargo-mutants" ]; then
  cargo install --locked cargo-mutants --root "$tools"
fi
export PATH=$tools/bin:$PATH
# A mutant can make a test allocate without end (a loop that no longer stops pushing; one
# took 24 GB here and the OOM killer's next victim was a build beside it): `capped CMD…` runs
# CMD with its address space, and its children's, capped at two thirds of the machine's memory,
# so such a test fails on its own (the mutant counts as caught, as a real run's failure would).
# Only for passes that start no Node.js process (V8 reserves far more address space than it
# uses). MUTANTS_MEMORY_KB overrides the cap.
capped() {
  local mem_kb
  mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
  (
    ulimit -v "${MUTANTS_MEMORY_KB:-$((mem_kb * 2 / 3))}"
    "$@"
  )
}

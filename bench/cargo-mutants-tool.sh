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

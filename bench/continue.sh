#!/usr/bin/env bash
# `openmax --stdio --continue` on a 1 GB session record, through the real release binary:
# time from spawn to the `transcript` line, and the process's peak RSS (/usr/bin/time -v).
#
# The record is built once by the `session_resume` example (realistic turns, tool results of
# 4-32 KiB, a compaction point near the end, about N GiB) under DIR/home for the project
# DIR/proj, and reused by later runs. No model request is made: stdin is closed right after the
# transcript line, so the process exits on EOF.
#
# Usage: bench/continue.sh [DIR] [--gb N] [--rebuild] [--runs N]
#   DIR defaults to ${TMPDIR:-/tmp}/openmax-bench-continue.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${TMPDIR:-/tmp}/openmax-bench-continue"
gb=1
runs=3
rebuild=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gb) gb="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --rebuild) rebuild=(--rebuild); shift ;;
    *) dir="$1"; shift ;;
  esac
done
[ -x /usr/bin/time ] || { echo "continue.sh: needs /usr/bin/time (GNU time) for peak RSS" >&2; exit 1; }

cd "$root"
cargo build --release -q -p openmax-shell --bin openmax --example session_resume
bin="$root/target/release/openmax"
# Builds the record when missing (then times the library's resume_latest, printed for reference).
echo "== building/checking the record (session_resume example) =="
"$root/target/release/examples/session_resume" "$dir" --gb "$gb" "${rebuild[@]}"

home="$dir/home"
proj="$dir/proj"
record="$(ls "$home"/projects/*/sessions/*.jsonl | head -1)"
size=$(stat -c %s "$record")
# A provider config that is never called (no user command is sent).
cat > "$home/config.toml" <<EOF
[provider]
name = "anthropic"
model = "bench"
base_url = "http://127.0.0.1:9"
api_key_env = "OPENMAX_BENCH_KEY"
EOF

echo "== openmax --stdio --continue, record $record ($(awk "BEGIN{printf \"%.2f\", $size/1073741824}") GiB) =="
for run in $(seq 1 "$runs"); do
  tfile="$(mktemp)"
  efile="$(mktemp)"
  ofile="$(mktemp)"
  : > "$tfile"
  start=$(date +%s%N)
  # head reads in blocks and exits after the transcript line; bash waits only for head here
  # (process substitution), so $t is when the client had the transcript line. stdin is
  # /dev/null: openmax exits on EOF right after the handshake.
  head -n 2 > "$ofile" < <(cd "$proj" && exec env -i PATH="$PATH" HOME="$home" \
      OPENMAX_HOME="$home" OPENMAX_BENCH_KEY=x /usr/bin/time -v -o "$tfile" "$bin" --stdio \
      --continue --project "$proj" < /dev/null 2>"$efile")
  t=$(date +%s%N)
  for _ in $(seq 1 500); do grep -q "Exit status" "$tfile" && break; sleep 0.01; done
  hello="$(sed -n 1p "$ofile")"
  transcript="$(sed -n 2p "$ofile")"
  case "$hello" in *'"continued":true'*) ;; *) echo "not continued: $hello"; cat "$efile"; exit 1 ;; esac
  case "$transcript" in '{"type":"transcript"'*) ;; *) echo "not a transcript: ${transcript:0:200}"; exit 1 ;; esac
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tfile")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tfile")
  msgs=$(grep -o '"role":' <<<"$transcript" | wc -l)
  printf 'run %d: transcript line after %.1f ms (whole process %s, exit on EOF included); peak RSS %.1f MiB; transcript %d messages, %d KiB\n' \
    "$run" "$(awk "BEGIN{print ($t-$start)/1e6}")" "$wall" "$(awk "BEGIN{print $rss/1024}")" \
    "$msgs" "$(( ${#transcript} / 1024 ))"
  rm -f "$tfile" "$efile" "$ofile"
done

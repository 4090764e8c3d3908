#!/usr/bin/env python3
"""The terminal UI under a pseudo-terminal: the release `openmax` against the sim's loopback
mock (bench_mock), Python 3 stdlib only. The script is the terminal: it sets the pty's size,
answers the cursor-position query (ESC [6n) the inline viewport makes, types keys and reads
every byte drawn. Medians of RUNS runs (default 5):

  first_prompt   launch (just before fork) to the first drawn prompt ("type a prompt")
  stream_2000    a 2000-delta reply, 1 ms between deltas (the mock's --delay-ms 1): frames
                 drawn (synchronized-update begins, ESC [?2026h, counted in the output), their
                 rate over the stream, and the session's CPU time (user+sys from wait4),
                 against `openmax --stdio` on the same reply (same mock, same prompt, then EOF)
  echo           while that reply streams, one key every 40 ms (distinct Greek letters, the
                 prompt cleared with Ctrl-U every 20): time from the key's write to the first
                 output byte drawing it; p50 and p99 over all keys of all runs

Targets: frames at most 60 a second; CPU at most 3x the --stdio path; echo p99 under 16 ms.

Usage: bench/tui.py [--runs N] [--bin PATH] [--mock PATH] [--json FILE]
Build first: cargo build --release -p openmax-shell --bin openmax &&
cargo build --release -p openmax-sim --example bench_mock
"""
import argparse
import fcntl
import json
import os
import pty
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402  (SimMock, run_child, the trust and config helpers)

ROOT = e2e.ROOT
COLS, ROWS = 100, 30
SYNC = b"\x1b[?2026h"
CPR = b"\x1b[6n"
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"


class Pty:
    """`cmd` on a new pty of COLS x ROWS; this object is its terminal."""

    def __init__(self, cmd, env, cwd):
        self.t0 = time.monotonic_ns()
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(cwd)
            os.execve(cmd[0], cmd, env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.out = bytearray()
        self.status = None
        self.rusage = None

    def pump(self, timeout):
        """Read what is there (up to `timeout` s); answer cursor-position queries."""
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return b""
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            return None
        start = len(self.out)
        self.out += data
        # A query may straddle two reads: look at the joined tail.
        for _ in range(bytes(self.out[max(0, start - 3):]).count(CPR)):
            os.write(self.fd, f"\x1b[{ROWS};1R".encode())
        return data

    def write(self, b):
        os.write(self.fd, b)

    def until(self, pred, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not pred(self.out):
            if time.monotonic() > deadline:
                raise RuntimeError("timed out; last output: %r" % bytes(self.out[-600:]))
            if self.pump(0.05) is None:
                raise RuntimeError("the TUI ended; last output: %r" % bytes(self.out[-600:]))

    def wait(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pump(0.05) is None:
                break
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self.status, self.rusage = os.waitstatus_to_exitcode(status), ru
                break
        if self.status is None:
            _, status, ru = os.wait4(self.pid, 0)
            self.status, self.rusage = os.waitstatus_to_exitcode(status), ru
        os.close(self.fd)
        return self.status


class TuiBench(e2e.Bench):
    def trust(self):
        # `openmax --trust` needs a human's terminal; an unattended bench trusts the scratch
        # project in the user config instead (`[trust] projects`).
        self.trust_note = "trusted by [trust] projects in the user config"

    def configure(self, port):
        super().configure(port)
        with open(os.path.join(self.home, "config.toml"), "a") as f:
            f.write(f"\n[trust]\nprojects = [{json.dumps(self.project)}]\n")

    def env_for(self):
        env = dict(self.env)
        env["TERM"] = "xterm-256color"
        return env

    def first_prompt(self):
        p = Pty(self.openmax(), self.env_for(), self.project)
        p.until(lambda o: b"type a prompt" in o)
        t = (time.monotonic_ns() - p.t0) / 1e9
        p.write(b"\x04")
        code = p.wait()
        return {"exit": code, "first_prompt_s": t}

    def stream(self, echo):
        p = Pty(self.openmax(), self.env_for(), self.project)
        p.until(lambda o: b"type a prompt" in o)
        p.write(b"go\r")
        start_frames = p.out.count(SYNC)
        # Drawing is a diff of cells, so match the mark, not a whole delta with its space.
        p.until(lambda o: b"zq" in o)
        t_stream = time.monotonic_ns()
        lat = []
        n = 0
        # The finished reply goes to the scrollback as whole rows: its last delta is there.
        last = b"zq1999"
        while last not in p.out:
            if echo:
                ch = GREEK[n % len(GREEK)].encode()
                if n % 20 == 19:
                    p.write(b"\x15")  # Ctrl-U: clear the prompt; the next letters are new
                    p.until(lambda o: True, 1)
                n += 1
                mark = len(p.out)
                t_key = time.monotonic_ns()
                p.write(ch)
                deadline = time.monotonic() + 2
                while ch not in p.out[mark:] and time.monotonic() < deadline:
                    p.pump(0.002)
                if ch in p.out[mark:]:
                    lat.append((time.monotonic_ns() - t_key) / 1e6)
                wait_until = time.monotonic() + 0.04
                while time.monotonic() < wait_until and last not in p.out:
                    p.pump(0.005)
            else:
                p.pump(0.05)
        t_end = time.monotonic_ns()
        p.until(lambda o: b"working" not in bytes(o[-400:]), 10)
        frames = p.out.count(SYNC) - start_frames
        p.write(b"\x15\x04")
        code = p.wait()
        ru = p.rusage
        secs = (t_end - t_stream) / 1e9
        return {"exit": code, "frames": frames, "stream_s": secs,
                "fps": frames / secs if secs > 0 else None,
                "cpu_s": ru.ru_utime + ru.ru_stime, "echo_ms": lat}

    def stdio(self):
        r = e2e.run_child(self.openmax("--stdio"), env=self.env, cwd=self.project,
                          stdin_bytes=b'{"cmd":"user","text":"go"}\n')
        return {"exit": r["exit"], "cpu_s": r["cpu_s"], "tokens": r["token_lines"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/openmax"))
    ap.add_argument("--mock", default=os.path.join(ROOT, "target/release/examples/bench_mock"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    args.flavor, args.preload, args.warmup = "anthropic", None, 1
    b = TuiBench(args)
    b.trust()
    res = {}
    mock = e2e.SimMock(args.mock, 1)
    try:
        b.configure(mock.port)
        runs = [b.first_prompt() for _ in range(args.runs + 1)][1:]
        res["first_prompt_s"] = statistics.median(r["first_prompt_s"] for r in runs)
    finally:
        mock.stop()
    mock = e2e.SimMock(args.mock, 2000, delay_ms=1)
    try:
        b.configure(mock.port)
        stdio = [b.stdio() for _ in range(args.runs + 1)][1:]
        tui = [b.stream(echo=False) for _ in range(args.runs + 1)][1:]
        echo = [b.stream(echo=True) for _ in range(args.runs)]
    finally:
        mock.stop()
    bad = [r for r in stdio + tui + echo if r["exit"] != 0]
    if bad:
        print(f"{len(bad)} runs exited nonzero: {bad[:2]}", file=sys.stderr)
    res["stdio_cpu_s"] = statistics.median(r["cpu_s"] for r in stdio)
    res["stdio_tokens"] = statistics.median(r["tokens"] for r in stdio)
    res["tui_cpu_s"] = statistics.median(r["cpu_s"] for r in tui)
    res["frames"] = statistics.median(r["frames"] for r in tui)
    res["fps"] = statistics.median(r["fps"] for r in tui)
    res["stream_s"] = statistics.median(r["stream_s"] for r in tui)
    res["cpu_ratio"] = res["tui_cpu_s"] / res["stdio_cpu_s"]
    lat = sorted(x for r in echo for x in r["echo_ms"])
    res["echo_n"] = len(lat)
    res["echo_p50_ms"] = e2e.pct(lat, 50) if lat else None
    res["echo_p99_ms"] = e2e.pct(lat, 99) if lat else None
    res["echo_cpu_s"] = statistics.median(r["cpu_s"] for r in echo)
    print("| figure | value | target |")
    print("| --- | --- | --- |")
    print(f"| launch to first drawn prompt | {res['first_prompt_s'] * 1000:.0f} ms | |")
    print(f"| 2000 deltas at 1 ms: frames drawn | {res['frames']:.0f} over {res['stream_s']:.2f} s"
          f" = {res['fps']:.0f}/s | ≤ 60/s {'met' if res['fps'] <= 60 else 'MISSED'} |")
    print(f"| CPU, TUI session | {res['tui_cpu_s'] * 1000:.0f} ms | |")
    print(f"| CPU, --stdio session, same reply | {res['stdio_cpu_s'] * 1000:.0f} ms | |")
    print(f"| CPU ratio TUI / --stdio | {res['cpu_ratio']:.2f}x | ≤ 3x "
          f"{'met' if res['cpu_ratio'] <= 3 else 'MISSED'} |")
    if lat:
        print(f"| key to echo while streaming, p50 / p99 ({len(lat)} keys) | "
              f"{res['echo_p50_ms']:.1f} / {res['echo_p99_ms']:.1f} ms | p99 < 16 ms "
              f"{'met' if res['echo_p99_ms'] < 16 else 'MISSED'} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": res, "tui": tui, "echo": echo, "stdio": stdio}, f, indent=1)
    shutil.rmtree(b.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""End-to-end bench of the release `openmax` binary against a loopback mock.

Python 3 stdlib only. Measures, medians of RUNS runs (default 10), each from just before
fork/exec on the monotonic clock, with the kernel's rusage of the child (os.wait4):

  hello        `openmax --stdio` with stdin held open: time to the first stdout line (hello)
  turn_1tok    `--stdio` fed one `user` command then EOF, a 1-delta reply: wall, CPU, RSS
  print_1tok   `-p hi`, a 1-delta reply: wall, CPU, RSS
  turn_2000    `--stdio`, a 2000-delta reply with no delay: wall, CPU (user+sys), peak RSS
  latency_1ms  `--stdio`, a 2000-delta reply with 1 ms between deltas: the added latency per
               event, i.e. for delta i, (arrival of the stdout line carrying it) - (the moment
               the mock's send of its bytes returned), both on the one monotonic clock (the
               mock is a process forked by this script, sending the exact bytes the sim's
               renderer makes, from `bench_mock --dump`). Median, p90, p99 and p99.9 over all
               events of all runs; the openmax and curl runs take turns, each against its own
               mock process. Target: p99 within 1.2x curl's.
  check        `openmax --stdio --check` over a file of valid token lines: MB/s
  grep_100k    `--stdio`, one turn whose reply calls `grep` for a literal over a generated
               100,000-file tree (100 dirs x 1,000 files, 100 of them matching): the time from
               the `tool_start` line to the `tool_end` line, beside `rg -n` of the same pattern
               over the same directory (wall, from fork to exit) as the floor

and the same stream through `curl -N` as the floor (1-token, 2000-delta, latency). The 1-token
and 2000-delta replies come from the sim's mock (`sim/examples/bench_mock.rs`, hyper on
127.0.0.1). Prints a table with ratios to curl and to Codex CLI's reference figures, and the
targets met or missed; `--json FILE` also writes every run.

The project is trusted the way the binary offers: `openmax --trust` run in the scratch project
with the same OPENMAX_HOME, on a pseudo-terminal (the command requires a terminal on stdin). Every process this script starts is ended by it.

Usage: bench/e2e.py [--runs N] [--bin PATH] [--mock PATH] [--flavor anthropic|openai|openai-chat]
                    [--only hello,turn_1tok,...] [--check-mb N] [--json FILE]
                    [--preload /usr/lib/x86_64-linux-gnu/libeatmydata.so]   (diagnostic: no fsync)
Build first (bench/e2e.sh does): cargo build --release -p openmax-shell --bin openmax &&
cargo build --release -p openmax-sim --example bench_mock
"""
import argparse
import json
import multiprocessing
import os
import pty
import re
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "zq"
DELTA_TEXT = MARK + "{i} "
DELTA_RE = re.compile(MARK.encode() + rb"(\d+) ")

# Codex CLI 0.171, measured once on this machine (medians of 10 runs).
CODEX = {"turn_1tok_wall": 0.185, "first_line": 0.083, "turn_2000_cpu": 0.255, "rss_mib": 143}
SCENARIOS = ["hello", "turn_1tok", "print_1tok", "turn_2000", "latency_1ms", "check",
             "grep_100k"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"mock on port {port} did not come up")


class SimMock:
    """The sim crate's mock as a child process (bench_mock), one fixed reply."""

    def __init__(self, mock_bin, deltas, delay_ms=0):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [mock_bin, "--addr", f"127.0.0.1:{self.port}", "--deltas", str(deltas),
             "--delay-ms", str(delay_ms), "--text", DELTA_TEXT],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        wait_port(self.port)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class TimestampMock:
    """A loopback HTTP/1.1 server sending pre-rendered SSE bytes (one chunk per delta, `delay_s`
    apart) and logging when each delta's send returned (time.monotonic_ns, one clock for every
    process of the machine). It runs in its own process, so its timestamps never wait on the
    interpreter lock of the thread that reads the client's output (which made some latencies
    come out negative, and others late by a lock hand-over, on a busy machine)."""

    def __init__(self, rendered, delay_s, log_dir):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        self.port = sock.getsockname()[1]
        fd, self.log = tempfile.mkstemp(prefix="sent-", suffix=".jsonl", dir=log_dir)
        os.close(fd)
        ctx = multiprocessing.get_context("fork")
        self.proc = ctx.Process(target=serve_timestamped, args=(sock, rendered, delay_s,
                                                               self.log), daemon=True)
        self.proc.start()
        sock.close()  # the server process has its own copy

    def sent(self, n, timeout=10.0):
        """Per request, in order: the send-return times (ns), index = delta - 1. Waits until
        `n` requests have been answered (or `timeout` passed)."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log) as f:
                sent = [json.loads(line) for line in f if line.endswith("\n")]
            if len(sent) >= n or time.monotonic() >= deadline:
                return sent
            time.sleep(0.01)

    def stop(self):
        self.proc.terminate()
        self.proc.join(timeout=5)


def serve_timestamped(sock, rendered, delay_s, log):
    """TimestampMock's server process: one connection at a time; after each request, the list
    of send-return times is appended to the file `log` as one JSON line (a file, not a pipe,
    so that nothing the parent has not read yet can hold the server)."""
    while True:
        conn, _ = sock.accept()
        try:
            times = serve_one(conn, rendered, delay_s)
        except OSError:
            times = None
        finally:
            conn.close()
        if times is not None:
            with open(log, "a") as f:
                f.write(json.dumps(times) + "\n")


def read_request(conn):
    """One HTTP/1.1 request from `conn`: (head, body), or None when the client went away
    before it was whole."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, body = buf.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(body) < length:
        data = conn.recv(65536)
        if not data:
            return None
        body += data
    return head, body


def serve_one(conn, rendered, delay_s):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = read_request(conn)
    if request is None:
        return None
    head, _ = request
    if not head.startswith(b"POST"):
        conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        return None

    def chunk(b):
        return b"%x\r\n%s\r\n" % (len(b), b) if b else b""

    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                 b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n"
                 b"connection: close\r\n\r\n" + chunk(rendered["prelude"]))
    times = []
    for step in rendered["steps"]:
        time.sleep(delay_s)
        conn.sendall(chunk(step))
        times.append(time.monotonic_ns())
    conn.sendall(chunk(rendered["tail"]) + b"0\r\n\r\n")
    return times


class ScriptMock:
    """A loopback HTTP/1.1 server thread answering the Nth POST with `bodies[N % len]` (whole
    SSE bodies, sent at once)."""

    def __init__(self, bodies):
        self.bodies = bodies
        self.count = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                if read_request(conn) is None:
                    continue
                out = self.bodies[self.count % len(self.bodies)]
                self.count += 1
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"content-length: %d\r\nconnection: close\r\n\r\n" % len(out)
                             + out)
            except OSError:
                pass
            finally:
                conn.close()

    def stop(self):
        self.stopping = True
        self.sock.close()
        self.thread.join(timeout=5)


def sse(events):
    return b"".join(b"event: %s\ndata: %s\n\n" % (e["type"].encode(), json.dumps(e).encode())
                    for e in events)


def anthropic_reply(block, deltas, stop):
    usage = {"input_tokens": 50, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": 1}
    return sse([
        {"type": "message_start", "message": {
            "id": "msg_bench", "type": "message", "role": "assistant", "model": "mock-model",
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        *({"type": "content_block_delta", "index": 0, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
         "usage": {"output_tokens": 1}},
        {"type": "message_stop"}])


def run_child(cmd, env=None, cwd=None, stdin_bytes=b"", stdin_path=None, hold_stdin=False,
              timeout=120.0, line_times=False):
    """Run once; measure first stdout line, wall, rusage; optionally timestamp every line."""
    t0 = time.monotonic_ns()
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.PIPE
    p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, cwd=cwd)
    if stdin_path:
        stdin.close()
    elif not hold_stdin:
        try:
            p.stdin.write(stdin_bytes)
            p.stdin.close()
        except BrokenPipeError:
            pass
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, "out")
    sel.register(p.stderr, selectors.EVENT_READ, "err")
    out, err = bytearray(), bytearray()
    lines = []  # (time_ns, line bytes) when line_times
    partial = b""
    first_line = None
    nlines = 0
    deadline = time.monotonic() + timeout
    open_streams = 2
    while open_streams:
        left = deadline - time.monotonic()
        if left <= 0:
            p.kill()
            break
        for key, _ in sel.select(timeout=left):
            data = os.read(key.fileobj.fileno(), 1 << 16)
            now = time.monotonic_ns()
            if not data:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            if key.data == "err":
                err += data
                continue
            n = data.count(b"\n")
            if n and first_line is None:
                first_line = now
                if hold_stdin:
                    p.stdin.close()
            nlines += n
            if line_times:
                parts = (partial + data).split(b"\n")
                partial = parts.pop()
                lines.extend((now, l) for l in parts)
            else:
                out += data
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = (time.monotonic_ns() - t0) / 1e9
    text = bytes(out)
    return {
        "exit": p.returncode,
        "wall_s": wall,
        "first_line_s": (first_line - t0) / 1e9 if first_line else None,
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "maxrss_kib": ru.ru_maxrss,  # polluted by this process's size; see Bench.repeat
        "lines": nlines,
        "token_lines": text.count(b'"type":"token"') if not line_times else
        sum(1 for _, l in lines if b'"type":"token"' in l),
        "done": (b'"type":"done"' in text) if not line_times else
        any(b'"type":"done"' in l for _, l in lines),
        "stdout_tail": text[-2000:].decode("utf-8", "replace"),
        "stderr": bytes(err)[-500:].decode("utf-8", "replace"),
        "_lines": lines,
        "_t0": t0,
    }


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="openmax-e2e-")
        self.home = os.path.join(self.tmp, "home")
        self.project = os.path.join(self.tmp, "project")
        os.makedirs(self.home)
        os.makedirs(os.path.join(self.project, ".git"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPENMAX_")}
        self.env.update({"OPENMAX_HOME": self.home, "OPENMAX_BENCH_KEY": "dummy",
                         "HOME": self.tmp})
        if args.preload:
            # Diagnostic only (e.g. libeatmydata.so, which turns fsync into a no-op): shows how
            # much of a figure is the disk's flush latency.
            self.env["LD_PRELOAD"] = args.preload
        self.results = {}
        self.runs = {}
        self.trust_note = None

    def configure(self, port):
        with open(os.path.join(self.home, "config.toml"), "w") as f:
            f.write("[provider]\n"
                    f'name = "{self.args.flavor}"\n'
                    'model = "mock-model"\n'
                    f'base_url = "http://127.0.0.1:{port}{"/v1" if self.args.flavor != "anthropic" else ""}"\n'
                    'api_key_env = "OPENMAX_BENCH_KEY"\n')

    def trust(self):
        self.configure(9)
        master, slave = pty.openpty()
        try:
            r = subprocess.run([self.args.bin, "--trust"], cwd=self.project, env=self.env,
                               stdin=slave, capture_output=True, text=True, timeout=30)
        finally:
            os.close(slave)
            os.close(master)
        self.trust_note = f"`openmax --trust` exit {r.returncode}: {(r.stdout + r.stderr).strip()}"
        print(self.trust_note, file=sys.stderr)

    def openmax(self, *extra):
        return [self.args.bin, *extra]

    def user_line(self):
        return b'{"cmd":"user","text":"Reply with the single word ok."}\n'

    def curl_cmd(self, port):
        flavor = self.args.flavor
        if flavor == "anthropic":
            url = f"http://127.0.0.1:{port}/v1/messages"
            body = {"model": "mock-model", "max_tokens": 64, "stream": True,
                    "messages": [{"role": "user", "content": "hi"}]}
        elif flavor == "openai":
            url = f"http://127.0.0.1:{port}/v1/responses"
            body = {"model": "mock-model", "stream": True, "input": "hi"}
        else:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            body = {"model": "mock-model", "stream": True,
                    "messages": [{"role": "user", "content": "hi"}]}
        return ["curl", "-sS", "-N", "-X", "POST", "-H", "content-type: application/json",
                "-H", "x-api-key: dummy", "-H", "anthropic-version: 2023-06-01",
                "-d", json.dumps(body), url]

    def repeat(self, name, fn, rss=None):
        """`fn` RUNS times after WARMUP uncounted runs. `rss` (a callable taking a command
        prefix) is then run RSS_RUNS times under /usr/bin/time for the peak RSS: a direct
        child of this Python process reports Python's own pre-exec size in ru_maxrss (the
        kernel keeps the high-water mark across exec), so the RSS comes from a grandchild of
        the small `time` program, whose ru_maxrss is the command's alone."""
        runs = [fn() for _ in range(self.args.warmup)]  # not counted
        runs = [fn() for _ in range(self.args.runs)]
        if rss is not None and os.access("/usr/bin/time", os.X_OK):
            kib = []
            out = os.path.join(self.tmp, "rss.txt")
            for _ in range(self.args.rss_runs):
                r = rss(["/usr/bin/time", "-f", "%M", "-o", out])
                with open(out) as f:
                    kib.append(int(f.read().split()[-1]))
                if r["exit"] != 0:
                    print(f"{name}: an RSS run failed: {r['stderr']!r}", file=sys.stderr)
            for r in runs:
                r["rss_kib"] = max(kib)
        self.runs[name] = [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs]
        bad = [r for r in runs if r["exit"] != 0]
        if bad:
            print(f"{name}: {len(bad)}/{len(runs)} runs failed; last stderr: {bad[-1]['stderr']!r}"
                  f" stdout tail: {bad[-1]['stdout_tail']!r}", file=sys.stderr)
        return runs

    def repeat_interleaved(self, fns):
        """Each of `fns` (name -> callable) WARMUP times uncounted, then RUNS times, taking
        turns; returns name -> runs. Failures are reported as in `repeat`."""
        for _ in range(self.args.warmup):
            for fn in fns.values():
                fn()
        out = {name: [] for name in fns}
        for _ in range(self.args.runs):
            for name, fn in fns.items():
                out[name].append(fn())
        for name, runs in out.items():
            self.runs[name] = [{k: v for k, v in r.items() if not k.startswith("_")}
                               for r in runs]
            bad = [r for r in runs if r["exit"] != 0]
            if bad:
                print(f"{name}: {len(bad)}/{len(runs)} runs failed; last stderr: "
                      f"{bad[-1]['stderr']!r}", file=sys.stderr)
        return out

    def summarize(self, name, runs, **extra):
        s = {
            "runs": len(runs),
            "ok": sum(1 for r in runs if r["exit"] == 0),
            "wall_s": median(r["wall_s"] for r in runs),
            "first_line_s": median(r["first_line_s"] for r in runs),
            "cpu_s": median(r["cpu_s"] for r in runs),
            "user_s": median(r["user_s"] for r in runs),
            "sys_s": median(r["sys_s"] for r in runs),
            "rss_mib": max((r.get("rss_kib", 0) for r in runs), default=0) / 1024 or None,
            "token_lines": median(r["token_lines"] for r in runs),
        }
        s.update(extra)
        self.results[name] = s
        return s

    # --- scenarios -------------------------------------------------------------------------

    def hello(self):
        self.configure(9)
        runs = self.repeat("hello", lambda pre=(): run_child(
            [*pre, *self.openmax("--stdio")], env=self.env, cwd=self.project, hold_stdin=True),
            rss=lambda pre: run_child([*pre, *self.openmax("--stdio")], env=self.env,
                                      cwd=self.project, hold_stdin=True))
        self.summarize("hello", runs)

    def turn(self, name, deltas, cmd, stdin_bytes):
        mock = SimMock(self.args.mock, deltas)
        try:
            self.configure(mock.port)
            runs = self.repeat(name, lambda: run_child(
                cmd, env=self.env, cwd=self.project, stdin_bytes=stdin_bytes),
                rss=lambda pre: run_child([*pre, *cmd], env=self.env, cwd=self.project,
                                          stdin_bytes=stdin_bytes))
            stdio = "--stdio" in cmd
            # A run counts as complete when the whole reply came out: every delta as a token
            # line and a `done` (--stdio), or the last delta's text (-p).
            complete = sum(1 for r in runs if r["exit"] == 0 and (
                (r["token_lines"] == deltas and r["done"]) if stdio else
                f"{MARK}{deltas} " in r["stdout_tail"]))
            self.summarize(name, runs, complete=complete)
            curl = self.curl_cmd(mock.port)
            runs = self.repeat(name + "_curl", lambda: run_child(curl),
                               rss=lambda pre: run_child([*pre, *curl]))
            self.summarize(name + "_curl", runs, complete=sum(
                1 for r in runs if r["exit"] == 0 and f"{MARK}{deltas} " in r["stdout_tail"]))
        finally:
            mock.stop()

    def latency(self):
        rendered = json.loads(subprocess.run(
            [self.args.mock, "--dump", self.args.flavor, "--deltas", "2000", "--text", DELTA_TEXT],
            check=True, capture_output=True).stdout)
        rendered = {"prelude": rendered["prelude"].encode(),
                    "steps": [s.encode() for s in rendered["steps"]],
                    "tail": rendered["tail"].encode()}
        # One mock per side, both alive, and the runs interleaved (openmax, curl, openmax, ...)
        # so that a change in the machine's load falls on both sides alike.
        mocks = {who: TimestampMock(rendered, 0.001, self.tmp) for who in ("openmax", "curl")}
        try:
            self.configure(mocks["openmax"].port)
            fns = {
                "openmax": lambda: run_child(self.openmax("--stdio"), env=self.env,
                                             cwd=self.project, stdin_bytes=self.user_line(),
                                             line_times=True),
                "curl": lambda: run_child(self.curl_cmd(mocks["curl"].port), line_times=True),
            }
            names = {"openmax": "latency_1ms", "curl": "latency_1ms_curl"}
            all_runs = self.repeat_interleaved({names[w]: fns[w] for w in fns})
            # A server logs a request once its client has gone: wait for every log line.
            sent = {who: mock.sent(self.args.warmup + self.args.runs)[-self.args.runs:]
                    for who, mock in mocks.items()}
        finally:
            for mock in mocks.values():
                mock.stop()
        for who in mocks:
            runs = all_runs[names[who]]
            lat = []
            requests = sent[who]
            missing = 0
            for r, times in zip(runs, requests):
                seen = {}
                for t, line in r["_lines"]:
                    for m in DELTA_RE.finditer(line):
                        seen.setdefault(int(m.group(1)), t)
                for i, ts in enumerate(times, start=1):
                    if i in seen:
                        lat.append((seen[i] - ts) / 1e6)
                    else:
                        missing += 1
            self.summarize(names[who], runs, lat_median_ms=median(lat), lat_p90_ms=pct(lat, 90),
                           lat_p99_ms=pct(lat, 99), lat_p999_ms=pct(lat, 99.9),
                           lat_max_ms=max(lat) if lat else None, events=len(lat),
                           missing_events=missing)

    def grep_100k(self):
        if self.args.flavor != "anthropic":
            print("grep_100k: anthropic flavor only; skipped", file=sys.stderr)
            return
        tree = os.path.join(self.project, "tree")
        for d in range(100):
            sub = os.path.join(tree, f"d{d:03}")
            os.makedirs(sub)
            for i in range(1000):
                with open(os.path.join(sub, f"f{i:04}.txt"), "w") as f:
                    f.write(f"file {d} {i}\nsome ordinary text line\n"
                            + ("the NEEDLE is here\n" if i == 500 else "nothing to see\n"))
        call = anthropic_reply(
            {"type": "tool_use", "id": "toolu_grep", "name": "grep", "input": {}},
            [{"type": "input_json_delta", "partial_json": json.dumps({"pattern": "NEEDLE"})}],
            "tool_use")
        text = anthropic_reply({"type": "text", "text": ""},
                               [{"type": "text_delta", "text": "ok"}], "end_turn")
        mock = ScriptMock([call, text])
        try:
            self.configure(mock.port)
            runs = self.repeat("grep_100k", lambda: run_child(
                self.openmax("--stdio"), env=self.env, cwd=self.project,
                stdin_bytes=self.user_line(), line_times=True))
        finally:
            mock.stop()
        spans, matches = [], None
        for r in runs:
            start = next((t for t, l in r["_lines"] if b'"type":"tool_start"' in l), None)
            end = next(((t, l) for t, l in r["_lines"] if b'"type":"tool_end"' in l), None)
            if start and end:
                spans.append((end[0] - start) / 1e9)
                matches = json.loads(end[1])["output"].count("NEEDLE")
        self.summarize("grep_100k", runs, span_s=median(spans), matches=matches)
        if shutil.which("rg"):
            rg = self.repeat("grep_100k_rg", lambda: run_child(
                ["rg", "-n", "NEEDLE", "."], cwd=self.project))
            self.summarize("grep_100k_rg", rg, span_s=median(r["wall_s"] for r in rg),
                           matches=rg[-1]["lines"] if rg else None)
        shutil.rmtree(tree, ignore_errors=True)

    def check(self):
        path = os.path.join(self.tmp, "check.jsonl")
        target = self.args.check_mb * 1_000_000
        hello = (b'{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,'
                 b'"session_id":"s-bench-0001","version":"0.2.0","project":"/tmp/bench",'
                 b'"continued":false}\n')
        lines = [b'{"session_id":"s-bench-0001","type":"token","text":"The quick brown fox jumps '
                 b'over the lazy dog, \\"quoted\\" and \\\\ escaped.\\n"}\n',
                 b'{"session_id":"s-bench-0001","type":"token","text":"tok "}\n']
        block = b"".join(lines) * 4096
        with open(path, "wb") as f:
            f.write(hello)
            written = len(hello)
            while written < target:
                f.write(block)
                written += len(block)
            tail = (b'{"session_id":"s-bench-0001","type":"message_done","text":"..."}\n'
                    b'{"session_id":"s-bench-0001","type":"done","stop_reason":"end_turn"}\n')
            f.write(tail)
            written += len(tail)
        runs = [run_child(self.openmax("--stdio", "--check"), env=self.env, cwd=self.project,
                          stdin_path=path, timeout=600) for _ in range(max(3, self.args.runs // 3))]
        self.runs["check"] = [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs]
        s = self.summarize("check", runs, bytes=written)
        s["mb_per_s"] = written / 1e6 / s["wall_s"]
        os.unlink(path)

    # --- report ----------------------------------------------------------------------------

    def report(self):
        R = self.results

        def g(name, key):
            return R.get(name, {}).get(key)

        def f(x, unit="s", nd=3):
            if x is None:
                return "n/a"
            if unit == "ms":
                return f"{x * 1e3:.1f} ms"
            if unit == "MiB":
                return f"{x:.1f} MiB"
            return f"{x:.{nd}f} {unit}"

        def ratio(a, b):
            return "n/a" if a is None or not b else f"{a / b:.2f}x"

        rows = []
        rows.append(("time to hello (first line)", f(g("hello", "first_line_s"), "ms"), "",
                     ratio(g("hello", "first_line_s"), CODEX["first_line"]), "≤ 4 ms",
                     verdict(g("hello", "first_line_s"), 0.004)))
        for name, label in (("turn_1tok", "1-token turn wall (--stdio)"),
                            ("print_1tok", "1-token turn wall (-p)")):
            rows.append((label, f(g(name, "wall_s"), "ms"),
                         f"{f(g(name + '_curl', 'wall_s'), 'ms')} ({ratio(g(name, 'wall_s'), g(name + '_curl', 'wall_s'))})",
                         ratio(g(name, "wall_s"), CODEX["turn_1tok_wall"]), "≤ 18.5 ms",
                         verdict(g(name, "wall_s"), CODEX["turn_1tok_wall"] / 10)))
        rows.append(("2000-delta turn CPU (user+sys)", f(g("turn_2000", "cpu_s"), "ms"),
                     f"{f(g('turn_2000_curl', 'cpu_s'), 'ms')} ({ratio(g('turn_2000', 'cpu_s'), g('turn_2000_curl', 'cpu_s'))})",
                     ratio(g("turn_2000", "cpu_s"), CODEX["turn_2000_cpu"]),
                     "≤ 25.5 ms and ≤ 2x curl",
                     verdict2(g("turn_2000", "cpu_s"), CODEX["turn_2000_cpu"] / 10,
                              g("turn_2000_curl", "cpu_s"))))
        rows.append(("2000-delta turn wall", f(g("turn_2000", "wall_s"), "ms"),
                     f"{f(g('turn_2000_curl', 'wall_s'), 'ms')} ({ratio(g('turn_2000', 'wall_s'), g('turn_2000_curl', 'wall_s'))})",
                     "", "", ""))
        rss = max([g(n, "rss_mib") or 0 for n in ("hello", "turn_1tok", "print_1tok",
                                                   "turn_2000")])
        rows.append(("peak RSS (max of hello, 1-token, 2000-delta)", f(rss or None, "MiB"),
                     f(g("turn_2000_curl", "rss_mib"), "MiB"),
                     ratio(rss or None, CODEX["rss_mib"]), "≤ 20 MiB",
                     verdict(rss or None, 20)))
        for key, label, limit in (
                ("lat_median_ms", "added latency per event, median (1 ms spacing)", None),
                ("lat_p90_ms", "added latency per event, p90 (1 ms spacing)", None),
                ("lat_p99_ms", "added latency per event, p99 (1 ms spacing)", 1.2),
                ("lat_p999_ms", "added latency per event, p99.9 (1 ms spacing)", None)):
            a, b = g("latency_1ms", key), g("latency_1ms_curl", key)
            if limit is None:
                target, v = "printed", ("n/a" if a is None else "printed")
            else:
                target = f"≤ {limit}x curl"
                v = ("n/a" if a is None or not b else
                     "met" if a <= limit * b else f"missed ({a / b:.2f}x curl)")
            rows.append((label, "n/a" if a is None else f"{a:.3f} ms",
                         "n/a" if b is None else f"{b:.3f} ms ({ratio(a, b)})", "", target, v))
        rows.append(("2000-delta turn wall at 1 ms spacing", f(g("latency_1ms", "wall_s"), "ms"),
                     f(g("latency_1ms_curl", "wall_s"), "ms"), "", "", ""))
        a, b = g("grep_100k", "span_s"), g("grep_100k_rg", "span_s")
        rows.append(("grep over a 100k-file tree (tool_start to tool_end; rg: wall)",
                     f(a, "ms"), f"rg {f(b, 'ms')} ({ratio(a, b)})", "", "≤ 1.1x rg",
                     "n/a" if a is None or b is None else
                     ("met" if a <= 1.1 * b else f"missed ({a / b:.2f}x rg)")))
        c = g("check", "mb_per_s")
        rows.append(("--stdio --check over token lines", "n/a" if c is None else f"{c:.0f} MB/s",
                     "", "", "≥ 200 MB/s", verdict_ge(c, 200)))
        head = ("figure", "openmax", "curl floor (ratio)", "vs Codex CLI", "target", "verdict")
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        table = "\n".join(lines)
        print(table)
        print()
        for name, s in R.items():
            extra = {k: v for k, v in s.items() if k not in ("runs",)}
            print(f"{name}: " + ", ".join(f"{k}={fmt(v)}" for k, v in extra.items()))
        if self.trust_note:
            print(self.trust_note)
        return table


def fmt(v):
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def verdict(x, limit):
    return "n/a" if x is None else ("met" if x <= limit else f"missed ({x / limit:.1f}x over)")


def verdict_ge(x, limit):
    return "n/a" if x is None else ("met" if x >= limit else f"missed ({limit / x:.1f}x under)")


def verdict2(x, limit, floor):
    if x is None:
        return "n/a"
    a = x <= limit
    b = floor is not None and x <= 2 * floor
    if a and b:
        return "met"
    parts = []
    if not a:
        parts.append(f"{x / limit:.1f}x over 1/10 Codex")
    if not b and floor:
        parts.append(f"{x / floor:.1f}x curl")
    return "missed (" + ", ".join(parts) + ")"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/openmax"))
    ap.add_argument("--mock", default=os.path.join(ROOT, "target/release/examples/bench_mock"))
    ap.add_argument("--flavor", default="anthropic", choices=["anthropic", "openai", "openai-chat"])
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--check-mb", type=int, default=200)
    ap.add_argument("--rss-runs", type=int, default=3)
    ap.add_argument("--preload", default=None,
                    help="LD_PRELOAD for openmax only (diagnostic: libeatmydata.so = no fsync)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    for path in (args.bin, args.mock):
        if not os.access(path, os.X_OK):
            sys.exit(f"e2e.py: {path} is not built (see bench/e2e.sh)")
    if not shutil.which("curl"):
        sys.exit("e2e.py: curl is needed for the floor")
    b = Bench(args)
    only = args.only.split(",")
    try:
        b.trust()
        if "hello" in only:
            b.hello()
        if "turn_1tok" in only:
            b.turn("turn_1tok", 1, b.openmax("--stdio"), b.user_line())
        if "print_1tok" in only:
            b.turn("print_1tok", 1, b.openmax("-p", "Reply with the single word ok."), b"")
        if "turn_2000" in only:
            b.turn("turn_2000", 2000, b.openmax("--stdio"), b.user_line())
        if "latency_1ms" in only:
            b.latency()
        if "check" in only:
            b.check()
        if "grep_100k" in only:
            b.grep_100k()
        version = subprocess.run([args.bin, "--version"], capture_output=True, text=True).stdout
        curl_v = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout
        print(f"openmax: {version.strip()}; curl: {curl_v.splitlines()[0] if curl_v else '?'}; "
              f"runs: {args.runs} (+{args.warmup} warm-up); flavor: {args.flavor}"
              + (f"; LD_PRELOAD={args.preload}" if args.preload else ""))
        b.report()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"results": b.results, "runs": b.runs, "trust": b.trust_note}, f,
                          indent=1)
    finally:
        shutil.rmtree(b.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

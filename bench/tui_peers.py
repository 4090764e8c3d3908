#!/usr/bin/env python3
"""Time to the first prompt of each terminal UI, openmax beside the peers' (Codex CLI, Claude
Code, Gemini CLI), one run of this script, Python 3 stdlib only.

Each UI starts with no arguments on a new pseudo-terminal of COLS x ROWS in a scratch home and
project, against the shared loopback mock (../shared/bench-peers/mock_provider.py), inside a
network namespace that has only `lo` (the script re-executes itself under `unshare -rn`, or
`unshare -n` as root). The script is the terminal: it answers what a terminal answers (cursor
position ESC [6n, primary device attributes ESC [c, the foreground/background colour queries
OSC 10/11), so no UI waits out a query timeout a real terminal would not make it wait.

  first_prompt   launch (just before fork) until the UI's idle prompt is drawn (the peer's own
                 prompt text, matched with escape sequences and blanks removed), median of RUNS
                 runs after one warm-up; then the UI is sent SIGTERM (SIGKILL after 3 s)

Each peer is configured the way its docs offer for an unattended first start: onboarding done,
the scratch project trusted, the mock's base URL and a dummy key. A peer that is not installed
or never reaches its prompt is reported with why (the last screen it drew).

Usage: bench/tui_peers.py [--runs N] [--bin PATH] [--node-prefix DIR] [--peers a,b] [--json F]
Needs: the release `openmax` (cargo build --release -p openmax-shell --bin openmax) and the
peers installed as ../shared/bench-peers/run.sh installs them (npm, under --node-prefix,
default /tmp/peers-node).
"""
import argparse
import fcntl
import glob
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.environ.get("BENCH_PEERS") or next(
    (d for d in (os.path.join(ROOT, "..", "shared", "bench-peers"),
                 os.path.join(ROOT, "..", "..", "shared", "bench-peers")) if os.path.isdir(d)),
    "bench-peers")
COLS, ROWS = 100, 30
KEY = "sk-bench-dummy-key-000000000000"

# Escape sequences (CSI, OSC, two-byte) and blanks, removed before matching a prompt text.
STRIP = re.compile(rb"\x1b\[[0-9;?<>=!]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]|[\s\x00-\x1f]")


def squash(b):
    return STRIP.sub(b"", bytes(b))


def peers(bin_openmax, prefix):
    """name -> (argv, env, {path under home: text}, prompt markers); `{mock}`, `{home}` and `{work}` in
    the env and the files are the mock's base URL and the run's project."""
    def one(pattern):
        hits = sorted(glob.glob(os.path.join(prefix, pattern)))
        return hits[0] if hits else None

    base = "{mock}"
    work = "{work}"
    claude_state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "numStartups": 5,
        "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
        "projects": {work: {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
                            "allowedTools": []}},
    }
    return {
        "openmax": (
            [bin_openmax] if os.path.exists(bin_openmax) else None,
            {"OPENMAX_HOME": "{home}", "OPENAI_API_KEY": KEY},
            {"config.toml": "[provider]\nname = \"openai\"\nmodel = \"gpt-5.5\"\n"
                            f"base_url = \"{base}/v1\"\napi_key_env = \"OPENAI_API_KEY\"\n\n"
                            "[trust]\nprojects = [\"{work}\"]\n"},
            [b"typeaprompt"],
        ),
        "codex": (
            [one("node_modules/@openai/codex-linux-*/vendor/*/bin/codex")],
            {"CODEX_HOME": "{home}", "MOCK_API_KEY": KEY},
            {"config.toml": "model = \"gpt-5.5\"\nmodel_provider = \"mock\"\n"
                            "approval_policy = \"never\"\nsandbox_mode = \"read-only\"\n"
                            "check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n"
                            "[feedback]\nenabled = false\n\n"
                            "[projects.\"{work}\"]\ntrust_level = \"trusted\"\n\n"
                            "[model_providers.mock]\nname = \"mock\"\n"
                            f"base_url = \"{base}/v1\"\nenv_key = \"MOCK_API_KEY\"\n"
                            "wire_api = \"responses\"\n"},
            [b"forshortcuts", b"AskCodex", b"Implement{feature}", b"contextleft"],
        ),
        "claude": (
            [one("node_modules/.bin/claude")],
            {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": KEY,
             "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
             "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"},
            {".claude.json": json.dumps(claude_state)},
            [b"forshortcuts", b"(shift+tabtocycle)"],
        ),
        "gemini": (
            [one("node_modules/.bin/gemini")],
            {"GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": base},
            {".gemini/settings.json": json.dumps({
                "security": {"auth": {"selectedType": "gemini-api-key"},
                             "folderTrust": {"enabled": False}},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            })},
            [b"Typeyourmessage"],
        ),
    }


class Term:
    """`argv` on a new pty; this object is its terminal."""

    def __init__(self, argv, env, cwd):
        self.t0 = time.monotonic()
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(cwd)
            try:
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.out = bytearray()
        self.matched = None

    def answer(self, start):
        tail = bytes(self.out[max(0, start - 8):])
        for _ in range(tail.count(b"\x1b[6n")):
            os.write(self.fd, f"\x1b[{ROWS};1R".encode())
        for _ in range(tail.count(b"\x1b[c") + tail.count(b"\x1b[0c")):
            os.write(self.fd, b"\x1b[?62;22c")
        for q, a in ((b"\x1b]10;?", b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),
                     (b"\x1b]11;?", b"\x1b]11;rgb:0000/0000/0000\x1b\\")):
            for _ in range(tail.count(q)):
                os.write(self.fd, a)

    def until(self, markers, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.fd], [], [], 0.02)
            if r:
                try:
                    data = os.read(self.fd, 1 << 16)
                except OSError:
                    data = b""
                if not data:
                    return None, "exited before its prompt"
                start = len(self.out)
                self.out += data
                self.answer(start)
                flat = squash(self.out)
                for m in markers:
                    if m in flat:
                        self.matched = m.decode()
                        return time.monotonic() - self.t0, None
        return None, f"no prompt within {timeout:.0f} s"

    def stop(self):
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass
            end = time.monotonic() + wait
            while time.monotonic() < end:
                try:
                    os.read(self.fd, 1 << 16)
                except OSError:
                    pass
                pid, _ = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    os.close(self.fd)
                    return
                time.sleep(0.02)
        os.close(self.fd)


def lo_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, ifr)[:18])[1]
        if not flags & 1:
            fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
    finally:
        s.close()


def start_mock(workdir):
    portfile = os.path.join(workdir, "port")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(SHARED, "mock_provider.py"), "--host", "127.0.0.1",
         "--port", "0", "--port-file", portfile, "--log", os.path.join(workdir, "mock.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    for _ in range(500):
        if os.path.exists(portfile) and open(portfile).read().strip():
            return proc, int(open(portfile).read().strip())
        time.sleep(0.02)
    raise RuntimeError("the mock did not start")


def screen_text(out):
    text = STRIP.sub(b" ", bytes(out[-3000:])).decode("utf-8", "replace")
    return re.sub(r" {2,}", " ", text).strip()[-400:]


def run_peer(name, spec, runs, scratch, mock_base):
    argv, env_extra, files, markers = spec
    if not argv or not argv[0]:
        return {"peer": name, "error": "not installed"}
    times, error, last, matched = [], None, "", None
    for i in range(runs + 1):
        home = tempfile.mkdtemp(prefix=f"{name}-home-", dir=scratch)
        work = tempfile.mkdtemp(prefix=f"{name}-work-", dir=scratch)
        os.makedirs(os.path.join(work, ".git"))
        fill = lambda t: t.replace("{mock}", mock_base).replace("{work}", work).replace("{home}", home)  # noqa: E731
        for rel, text in files.items():
            path = os.path.join(home, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(fill(text))
        env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "TERM": "xterm-256color",
               "LANG": "C.UTF-8", "COLORTERM": "truecolor"}
        env.update({k: fill(v) for k, v in env_extra.items()})
        t = Term(argv, env, work)
        took, error = t.until(markers, 60.0)
        last = screen_text(t.out)
        matched = t.matched
        t.stop()
        if took is None:
            break
        if i > 0:
            times.append(took)
    if error:
        return {"peer": name, "error": error, "last_screen": last}
    return {"peer": name, "runs": len(times), "first_prompt_s": statistics.median(times),
            "min_s": min(times), "max_s": max(times), "matched": matched, "last_screen": last}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "openmax"))
    ap.add_argument("--node-prefix", default=os.environ.get("PEERS_NODE", "/tmp/peers-node"))
    ap.add_argument("--peers", default="openmax,codex,claude,gemini")
    ap.add_argument("--json")
    a = ap.parse_args()
    if os.environ.get("TUI_PEERS_NETNS") != "1":
        for ns in (["unshare", "-n"], ["unshare", "-rn"]):
            if subprocess.call(ns + ["true"], stderr=subprocess.DEVNULL) == 0:
                os.environ["TUI_PEERS_NETNS"] = "1"
                os.execvp(ns[0], ns + [sys.executable] + sys.argv)
        sys.exit("tui_peers.py: needs `unshare -n` or `unshare -rn` (loopback-only network)")
    lo_up()
    scratch = tempfile.mkdtemp(prefix="openmax-tui-peers-")
    mock, port = start_mock(scratch)
    base = f"http://127.0.0.1:{port}"
    results = []
    try:
        specs = peers(os.path.abspath(a.bin), a.node_prefix)
        for name in a.peers.split(","):
            r = run_peer(name, specs[name], a.runs, scratch, base)
            results.append(r)
            shown = {k: v for k, v in r.items() if k != "last_screen" or "error" in r}
            print(json.dumps(shown), flush=True)
    finally:
        mock.terminate()
        shutil.rmtree(scratch, ignore_errors=True)
    print("\n| TUI | time to first prompt, median s | min-max s | runs |\n| --- | --- | --- | --- |")
    for r in results:
        if "error" in r:
            print(f"| {r['peer']} | did not run: {r['error']} | | |")
        else:
            print(f"| {r['peer']} | {r['first_prompt_s']:.3f} | {r['min_s']:.3f}-{r['max_s']:.3f} "
                  f"| {r['runs']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

//! End-to-end test support: spawn the real `openmax` binary with a temporary `$OPENMAX_HOME`
//! and project against the loopback mock provider, and check every stream with the validator.
//!
//! Invariants: tests only ever reach 127.0.0.1; every spawned process gets a cleared
//! environment (PATH plus what the test sets), so the developer's own config, keys and
//! `OPENMAX_AGENT_SESSION` never leak in; every wait has a deadline and a failure prints the
//! whole stdout and stderr seen so far; every stdout stream a [`Session`] produced is run
//! through [`openmax_core::validate::check_stream`] when it finishes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub mod acp;
pub mod attack;
pub mod deps;
pub mod inspect;
pub mod runner;
pub mod tmux;
pub mod web;

use serde_json::Value;

pub use inspect::{files_under, offered_tools};
pub use openmax_sim::mock::{unused_loopback_url, MockServer};
pub use openmax_sim::script::{Fault, Flavor, Reply, StreamEnd, StreamItem};
pub use runner::{runners, Who};

/// How long any single wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The variable the tests' config names as `api_key_env`.
pub const KEY_VAR: &str = "OPENMAX_E2E_KEY";

/// The built `openmax` binary: `target/<profile>/openmax` next to this test executable. Built
/// by `cargo test --workspace` (the shell package's integration tests need it); when it is
/// missing, it is built here with the same cargo. With `OPENMAX_TEST_REBUILD` set (the mutation
/// runs set it: cargo-mutants itself sets nothing a test can see) it is always built once per
/// test process, with the features the tests crate builds the shell with: `cargo test -p
/// openmax-tests` alone does not rebuild another package's binary, and a binary from before
/// the mutant would let every mutant survive.
pub fn openmax_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test executable has a path");
        // target/<profile>/deps/<test> → target/<profile>/openmax; a bench binary of this
        // crate lives in target/<profile>/ itself.
        let dir = exe.parent().expect("the test executable is in a directory");
        let profile_dir = if dir.ends_with("deps") {
            dir.parent()
                .expect("test executables live in target/<profile>/deps")
        } else {
            dir
        };
        let bin = profile_dir.join(format!("openmax{}", std::env::consts::EXE_SUFFIX));
        if !bin.exists() || std::env::var_os("OPENMAX_TEST_REBUILD").is_some() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-q", "-p", "openmax-shell", "--bin", "openmax"])
                .args(["--features", "panic-trigger"])
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building openmax failed");
        }
        assert!(
            bin.exists(),
            "{} not found: run `cargo build -p openmax-shell`",
            bin.display()
        );
        bin
    })
    .clone()
}

/// Copy an executable (the openmax binary) to `to`, with `cp` in a process of its own: the
/// copy's write descriptor never lives in this test process, where a child another test thread
/// forks meanwhile would inherit it until its exec, and an exec of the copy in that window
/// fails with "Text file busy".
pub fn copy_executable(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp runs");
    assert!(
        status.success(),
        "cp {} {} failed",
        from.display(),
        to.display()
    );
}

/// A temporary `$OPENMAX_HOME` and project (with a `.git` marker), removed on drop.
pub struct TestEnv {
    pub root: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
    /// Extra environment for every process started from here.
    pub env: Vec<(String, String)>,
    /// Who the processes started from here run as ([`TestEnv::run_as`]).
    pub who: Who,
}

impl Default for TestEnv {
    fn default() -> Self {
        TestEnv::new()
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        TestEnv::new_in(&std::env::temp_dir())
    }

    /// A test environment under `/var/tmp` rather than the system temp directory: the sandbox
    /// shows it (read-only, but the project) instead of hiding it behind the session's own
    /// temp directory, so a test can try to change what it holds (`$OPENMAX_HOME` among it).
    pub fn visible() -> TestEnv {
        TestEnv::new_in(Path::new("/var/tmp"))
    }

    /// A test environment in a new directory under `base`.
    pub fn new_in(base: &Path) -> TestEnv {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = base.join(format!(
            "openmax-e2e-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let project = root.join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(project.join(".git")).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        TestEnv {
            home: root.join("home"),
            project: root.join("project"),
            root,
            env: vec![(KEY_VAR.to_string(), "test-key".to_string())],
            who: Who::Me,
        }
    }

    /// Run every process started from here as `who`, which is given the whole tree (again at
    /// each start, so files the test writes meanwhile are its too).
    pub fn run_as(&mut self, who: Who) {
        self.who = who;
        who.own(&self.root);
    }

    /// Write `$OPENMAX_HOME/config.toml`.
    pub fn user_config(&self, toml: &str) {
        std::fs::write(self.home.join("config.toml"), toml).unwrap();
    }

    /// Write `<project>/.openmax/config.toml`.
    pub fn project_config(&self, toml: &str) {
        std::fs::create_dir_all(self.project.join(".openmax")).unwrap();
        std::fs::write(self.project.join(".openmax/config.toml"), toml).unwrap();
    }

    /// A user config pointing `flavor` at `base` (the mock's base URL) with fast retries.
    /// `extra` is appended inside `[provider]`.
    pub fn mock_config(&self, flavor: Flavor, base: &str, extra: &str) {
        let (name, url) = match flavor {
            Flavor::Anthropic => ("anthropic", base.to_string()),
            Flavor::Openai => ("openai", format!("{base}/v1")),
            Flavor::OpenaiChat => ("openai-chat", format!("{base}/v1")),
        };
        self.user_config(&format!(
            "[provider]\nname = \"{name}\"\nmodel = \"test-model\"\nbase_url = \"{url}\"\n\
             api_key_env = \"{KEY_VAR}\"\nmax_attempts = 5\nretry_base_ms = 1\n{extra}\n"
        ));
    }

    /// A `Command` for the binary with this env's home and project.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.who.openmax());
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("OPENMAX_HOME", &self.home)
            .current_dir(&self.project)
            .args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        self.who.own(&self.root);
        self.who.apply(&mut c);
        c
    }

    /// Run `openmax ARGS` to completion (stdin closed).
    pub fn run(&self, args: &[&str]) -> RunOutput {
        let child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openmax starts");
        wait_output(child)
    }

    /// Run `openmax ARGS` with `input` on stdin.
    pub fn run_with_stdin(&self, args: &[&str], input: &[u8]) -> RunOutput {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openmax starts");
        let mut stdin = child.stdin.take().expect("piped");
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = wait_output(child);
        let _ = writer.join();
        out
    }

    /// `openmax --trust` in the project, run as a human would (stdin a terminal); asserts it
    /// succeeded.
    pub fn trust(&self) {
        let out = self.run_on_tty(&["--trust"]);
        assert_eq!(out.code, Some(0), "--trust failed: {}", out.stderr);
    }

    /// Run `openmax ARGS` to completion with a pseudo-terminal on stdin (the human-only
    /// commands `--trust` and `--approve` require one).
    pub fn run_on_tty(&self, args: &[&str]) -> RunOutput {
        let (master, slave) = pty_pair();
        let child = self
            .command(args)
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openmax starts");
        let out = wait_output(child);
        drop(master);
        out
    }

    /// Start `openmax --stdio ARGS` and read its hello.
    pub fn stdio(&self, args: &[&str]) -> Session {
        let mut all = vec!["--stdio"];
        all.extend_from_slice(args);
        let mut child = self
            .command(&all)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openmax starts");
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
        let mut stderr = child.stderr.take().expect("piped");
        let (etx, erx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            let _ = etx.send(s);
        });
        let mut s = Session {
            child,
            stdin,
            lines: rx,
            stderr: erx,
            seen: Vec::new(),
            hello: Value::Null,
        };
        s.hello = s.next_value().unwrap_or_else(|| s.fail("no hello line"));
        assert_eq!(s.hello["type"], "hello", "first line is hello");
        s
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A pseudo-terminal: (master, slave), both open read-write.
pub fn pty_pair() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain libc calls on a fresh descriptor; each result is checked before use and
    // ptsname's static buffer is copied at once (tests run it from one thread at a time per
    // call; a race would only give another valid name of a pty we then fail to open).
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(m >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let master = OwnedFd::from_raw_fd(m);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let s = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(
            s >= 0,
            "open pty slave: {}",
            std::io::Error::last_os_error()
        );
        (master, OwnedFd::from_raw_fd(s))
    }
}

/// A finished process.
#[derive(Debug)]
pub struct RunOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Wait for a child spawned with piped stdout and stderr (with the deadline).
pub fn wait_child(child: Child) -> RunOutput {
    wait_output(child)
}

fn wait_output(mut child: Child) -> RunOutput {
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let mut stderr = String::new();
    let _ = err.read_to_string(&mut stderr);
    let stdout = t.join().unwrap_or_default();
    let status = wait_deadline(&mut child);
    RunOutput {
        code: status.code(),
        stdout,
        stderr,
    }
}

fn wait_deadline(child: &mut Child) -> ExitStatus {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(s) = child.try_wait().expect("wait works") {
            return s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("openmax did not exit within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A running `openmax --stdio`.
pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    /// Every stdout line so far (hello included).
    pub seen: Vec<String>,
    pub hello: Value,
}

impl Session {
    /// Write one command line.
    pub fn send(&mut self, cmd: Value) {
        let mut line = cmd.to_string();
        line.push('\n');
        self.send_bytes(line.as_bytes());
    }

    /// `{"cmd":"user","text":…}`
    pub fn user(&mut self, text: &str) {
        self.send(serde_json::json!({"cmd":"user","text":text}));
    }

    /// Write raw bytes.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(bytes).expect("write to openmax");
        stdin.flush().expect("flush to openmax");
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Close stdin (EOF).
    pub fn close(&mut self) {
        self.stdin = None;
    }

    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let err = self
            .stderr
            .recv_timeout(Duration::from_secs(2))
            .unwrap_or_default();
        panic!(
            "{why}\n--- stdout so far ---\n{}\n--- stderr ---\n{err}",
            self.seen.join("\n")
        );
    }

    fn next_value(&mut self) -> Option<Value> {
        let line = self.lines.recv_timeout(DEADLINE).ok()?;
        self.seen.push(line.clone());
        Some(serde_json::from_str(&line).unwrap_or_else(|e| {
            self.fail(&format!("stdout line is not JSON ({e}): {line}"));
        }))
    }

    /// The next event, failing the test after the deadline.
    pub fn event(&mut self) -> Value {
        match self.next_value() {
            Some(v) => v,
            None => self.fail("no next line before the deadline (or stdout closed)"),
        }
    }

    /// Read events until one satisfies `pred`; returns all read, that one last.
    pub fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            let v = self.event();
            let stop = pred(&v);
            got.push(v);
            if stop {
                return got;
            }
        }
    }

    /// Read until an event of `type`.
    pub fn until_type(&mut self, ty: &str) -> Vec<Value> {
        self.until(|v| v["type"] == ty)
    }

    /// Read until `done`; returns the events and the stop reason.
    pub fn turn(&mut self) -> (Vec<Value>, String) {
        let evs = self.until_type("done");
        let reason = evs
            .last()
            .and_then(|d| d["stop_reason"].as_str())
            .unwrap_or_default()
            .to_string();
        (evs, reason)
    }

    /// Close stdin, read to EOF, wait for exit; validate the whole stream. Returns the exit
    /// code, the remaining events and stderr.
    pub fn finish(mut self) -> (Option<i32>, Vec<Value>, String) {
        self.close();
        let mut rest = Vec::new();
        let end = Instant::now() + DEADLINE;
        while let Ok(line) = self
            .lines
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line.clone());
            rest.push(serde_json::from_str(&line).unwrap_or(Value::Null));
        }
        let status = wait_deadline(&mut self.child);
        let stderr = self
            .stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        assert_valid(&self.seen, &stderr);
        (status.code(), rest, stderr)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Assert the stream holds every rule of the contract.
pub fn assert_valid(lines: &[String], context: &str) {
    let v = openmax_core::validate::check_stream(lines.iter().map(String::as_str));
    assert!(
        v.is_empty(),
        "validator violations:\n{}\n--- stream ---\n{}\n--- context ---\n{context}",
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        lines.join("\n")
    );
}

/// The types of `events`, in order.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// The concatenated `token` texts of `events`.
pub fn tokens(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "token")
        .map(|e| e["text"].as_str().unwrap_or(""))
        .collect()
}

/// A completed text stream.
pub fn text_reply(text: &str) -> Reply {
    Reply::Stream {
        items: vec![StreamItem::Text { text: text.into() }],
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }
}

/// A completed stream carrying one tool call.
pub fn tool_reply(id: &str, name: &str, args: Value) -> Reply {
    Reply::Stream {
        items: vec![StreamItem::ToolCall {
            id: id.into(),
            name: name.into(),
            args,
        }],
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }
}

/// An error status.
pub fn status(code: u16, retry_after: Option<&str>, error: Option<&str>) -> Reply {
    Reply::Status {
        status: code,
        retry_after: retry_after.map(str::to_string),
        error: error.map(str::to_string),
        message: None,
    }
}

// ----- context budget helpers ---------------------------------------------------------------

/// Read an Anthropic Messages request body back into the [`ModelRequest`] it was built from,
/// as far as the estimator can tell: the system prompt, the tool schemas
/// (`input_schema` → `parameters`) and the messages with their blocks (`tool_result` → a
/// tool result, `is_error` → not ok; signed `thinking`, `text`, `tool_use`). The body's
/// merged messages stay merged, which the estimator counts the same way, so
/// `openmax_core::compaction::estimate_body` of the result is the core's estimate of the body
/// (exactly, as long as the conversation holds no empty text and no unsigned thinking, which
/// the body drops).
///
/// [`ModelRequest`]: openmax_core::conversation::ModelRequest
pub fn anthropic_request(body: &Value) -> openmax_core::conversation::ModelRequest {
    use openmax_core::conversation::{Block, Message, ModelRequest, Role, ToolSchema};
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let system = body["system"]
        .as_array()
        .map(|parts| parts.iter().map(|p| s(&p["text"])).collect::<String>())
        .unwrap_or_else(|| s(&body["system"]));
    let tools = body["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| ToolSchema {
                    name: s(&t["name"]),
                    description: s(&t["description"]),
                    parameters: t["input_schema"].clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    let messages = body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| Message {
                    role: if m["role"] == "assistant" {
                        Role::Assistant
                    } else {
                        Role::User
                    },
                    content: m["content"]
                        .as_array()
                        .map(|bs| {
                            bs.iter()
                                .filter_map(|b| match b["type"].as_str() {
                                    Some("text") => Some(Block::Text {
                                        text: s(&b["text"]),
                                    }),
                                    Some("thinking") => Some(Block::Thinking {
                                        text: s(&b["thinking"]),
                                        signature: b["signature"].as_str().map(str::to_string),
                                    }),
                                    Some("tool_use") => Some(Block::ToolUse {
                                        id: s(&b["id"]),
                                        name: s(&b["name"]),
                                        input: b["input"].clone(),
                                    }),
                                    Some("tool_result") => Some(Block::ToolResult {
                                        id: s(&b["tool_use_id"]),
                                        ok: b["is_error"] != Value::Bool(true),
                                        output: s(&b["content"]),
                                    }),
                                    _ => None,
                                })
                                .collect()
                        })
                        .unwrap_or_else(|| {
                            vec![Block::Text {
                                text: s(&m["content"]),
                            }]
                        }),
                })
                .collect()
        })
        .unwrap_or_default();
    ModelRequest {
        system,
        tools,
        messages,
    }
}

/// The prompt tokens the mock reports for a request it served with no scripted usage
/// (`openmax_sim::mock::encode::usage_for`: body bytes / 4, at least 1).
pub fn mock_reported_prompt_tokens(req: &openmax_sim::mock::LoggedRequest) -> u64 {
    (req.body_len as u64 / 4).max(1)
}

/// A copy of a JSON value with every `cache_control` key removed (the Anthropic body marks
/// only the newest user block, so the same history carries it in different places).
pub fn without_cache_control(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), without_cache_control(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_cache_control).collect()),
        other => other.clone(),
    }
}

// ---- Helpers for the tools, sessions and crash tests (added; the ones above are unchanged) ----

impl TestEnv {
    /// Set the project's approval mode through a short `--stdio` process (acknowledged, so
    /// saved; a harness note of the start-up may come first) and check it exits 0.
    pub fn set_mode(&self, mode: &str) {
        let mut s = self.stdio(&[]);
        s.send(serde_json::json!({"cmd":"approval_mode","mode":mode}));
        let ack = s.until(|e| e["type"] != "harness_note").pop().unwrap();
        assert_eq!(
            ack,
            serde_json::json!({"type":"approval_mode","mode":mode}),
            "mode ack"
        );
        assert_eq!(s.finish().0, Some(0));
    }

    /// Write a project file (parents created).
    pub fn write(&self, rel: &str, content: &str) {
        let p = self.project.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(p, content).unwrap();
    }

    /// The record file of session `sid` (`$OPENMAX_HOME/projects/*/sessions/<sid>.jsonl`).
    pub fn record_path(&self, sid: &str) -> PathBuf {
        let projects = self.home.join("projects");
        for dir in std::fs::read_dir(&projects)
            .expect("a projects dir")
            .flatten()
        {
            let p = dir.path().join("sessions").join(format!("{sid}.jsonl"));
            if p.exists() {
                return p;
            }
        }
        panic!("no record for session {sid} under {}", projects.display());
    }

    /// Read a project file (`None` when missing).
    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.project.join(rel)).ok()
    }
}

impl Session {
    /// Answer approval `id`.
    pub fn approve(&mut self, id: &Value, approved: bool) {
        self.send(serde_json::json!({"cmd":"approve","approval_id":id,"approved":approved}));
    }

    /// Kill the process with SIGKILL and reap it; returns every stdout line seen (what was
    /// already read plus whatever was still in the pipe) and the stderr. Every line seen is
    /// checked by the validator except for end-of-stream rules (a killed stream ends anywhere).
    pub fn kill_hard(mut self) -> (Vec<String>, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let end = Instant::now() + DEADLINE;
        while let Ok(line) = self
            .lines
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line);
        }
        let stderr = self
            .stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        assert_valid_prefix(&self.seen, &stderr);
        (std::mem::take(&mut self.seen), stderr)
    }

    /// The next event if one arrives within `wait` (no failure otherwise).
    pub fn try_event(&mut self, wait: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(wait).ok()?;
        self.seen.push(line.clone());
        serde_json::from_str(&line).ok()
    }
}

/// Like [`assert_valid`] but for a stream cut short by a kill: every line-level and
/// cross-line rule holds, end-of-stream rules (an open turn, an unanswered user) are not
/// checked.
pub fn assert_valid_prefix(lines: &[String], context: &str) {
    let v: Vec<_> = openmax_core::validate::check_stream(lines.iter().map(String::as_str))
        .into_iter()
        .filter(|x| x.at != openmax_core::validate::Where::End)
        .collect();
    assert!(
        v.is_empty(),
        "validator violations:\n{}\n--- stream ---\n{}\n--- context ---\n{context}",
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        lines.join("\n")
    );
}

/// The first event of `ty` in `events` (panics naming the types seen when there is none).
pub fn find<'a>(events: &'a [Value], ty: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} among {:?}", types(events)))
}

/// Whether process `pid` still exists (a zombie counts as gone only once reaped).
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: kill(pid, 0) sends nothing; it only checks whether the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Poll until `pid` is gone; false if it still exists after the deadline.
pub fn wait_gone(pid: i32) -> bool {
    let end = Instant::now() + DEADLINE;
    while process_alive(pid) {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Whether `out` holds the kernel's refusal of a write outside the sandbox's writable places:
/// Landlock's (`Permission denied`), a read-only mount's, or a path the sandbox does not show
/// (everything under the system temp directory, which shows the session's own).
pub fn sandbox_refused(out: &str) -> bool {
    [
        "Permission denied",
        "Read-only file system",
        "No such file or directory",
    ]
    .iter()
    .any(|m| out.contains(m))
}

/// Whether a process with exactly this command line runs anywhere on the host. A process in
/// the sandbox knows only its pid in the sandbox's own pid namespace, so tests tell the
/// processes an agent started apart by a command line of their own (`sleep 3101`).
pub fn running(cmdline: &[&str]) -> bool {
    let want: Vec<u8> = cmdline.iter().flat_map(|a| a.bytes().chain([0])).collect();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| c == want)
}

/// Poll until no process with this command line runs; false at the deadline.
pub fn wait_cmdline_gone(cmdline: &[&str]) -> bool {
    let end = Instant::now() + DEADLINE;
    while running(cmdline) {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// SIGKILL every process with exactly this command line (a failing test's leftovers).
pub fn kill_all(cmdline: &[&str]) {
    let want: Vec<u8> = cmdline.iter().flat_map(|a| a.bytes().chain([0])).collect();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in procs.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if std::fs::read(e.path().join("cmdline")).ok() == Some(want.clone()) {
            // SAFETY: plain kill(2) of a test's own leftover process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// The host pid of the process a sandbox knows as `ns_pid` (its innermost pid namespace)
/// running `cmdline`.
pub fn host_pid(ns_pid: i32, cmdline: &[&str]) -> Option<i32> {
    let want: Vec<u8> = cmdline.iter().flat_map(|a| a.bytes().chain([0])).collect();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(host) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let inner = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|v| v.split_whitespace().last()?.parse::<i32>().ok());
        if inner == Some(ns_pid)
            && std::fs::read(e.path().join("cmdline")).ok() == Some(want.clone())
        {
            return Some(host);
        }
    }
    None
}

/// A completed stream carrying several tool calls `(id, name, args)`.
pub fn tool_calls_reply(calls: &[(&str, &str, Value)]) -> Reply {
    Reply::Stream {
        items: calls
            .iter()
            .map(|(id, name, args)| StreamItem::ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                args: args.clone(),
            })
            .collect(),
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }
}

/// utime + stime of process `pid`, in clock ticks (from `/proc/<pid>/stat`): a test reads it
/// twice to see whether a process is still working.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Wait until process `pid` has spent `ticks` more CPU ticks than now, and return how long that
/// took: proof that it is working, however loaded the machine (a fixed window would give a
/// starved process too few ticks). Fails after 120 s.
pub fn wait_busy(pid: u32, ticks: u64) -> Duration {
    let start = Instant::now();
    let t0 = cpu_ticks(pid);
    while cpu_ticks(pid) - t0 < ticks {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "process {pid} spent under {ticks} CPU ticks in 120 s: it is not working"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// Wait until process `pid` has been idle (at most one CPU tick) for a whole second, and
/// return the CPU ticks it spent in the 3 s after that. Stopped work winds down at its own
/// pace on a loaded machine, so a test waits for the quiet rather than a fixed time; work
/// that never stops never gets quiet, and this fails after 60 s.
pub fn ticks_after_quiet(pid: u32) -> u64 {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let t0 = cpu_ticks(pid);
        std::thread::sleep(Duration::from_secs(1));
        if cpu_ticks(pid) - t0 <= 1 {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "process {pid} never went quiet: its work did not stop"
        );
    }
    let t0 = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(3));
    cpu_ticks(pid) - t0
}

//! End to end: what reaches the terminal UI from the rest of the process, in a real terminal (a
//! tmux pane) against the loopback mock. Warnings openmax writes to stderr, from before the UI
//! takes the terminal on, are notice lines above the live region, not raw text over it; a
//! problem that is a note (an MCP server that did not start, a broken config on `/reload`) is
//! shown once, as a note, at launch and on each reload; the stderr of a
//! stdio MCP server (the real npm server-everything) goes to the session's MCP log; a server's
//! `tools/list_changed` notice is shown as on the wire; SIGTERM and SIGHUP mid-stream cancel
//! the turn, keep the session resumable and give the shell a sane terminal back; a second
//! signal exits 130.

use std::path::{Path, PathBuf};

use openmax_tests::deps::everything_js;
use openmax_tests::tmux::Pane;
use openmax_tests::*;

/// A trusted project whose mock serves `replies`, with `servers` (TOML) in the user config.
fn setup(replies: Vec<Reply>, servers: &str) -> (TestEnv, MockServer) {
    setup_in(TestEnv::new(), replies, servers)
}

/// As [`setup`], in `env`.
fn setup_in(env: TestEnv, replies: Vec<Reply>, servers: &str) -> (TestEnv, MockServer) {
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    if !servers.is_empty() {
        let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
        text.push('\n');
        text.push_str(servers);
        env.user_config(&text);
    }
    env.trust();
    (env, mock)
}

/// `text` streamed in `parts` pieces, `delay_ms` apart.
fn slow_text(pieces: &[String], delay_ms: u64) -> Reply {
    Reply::Stream {
        items: pieces
            .iter()
            .map(|p| StreamItem::Text { text: p.clone() })
            .collect(),
        end: StreamEnd::Complete { finish: None },
        delay_ms,
    }
}

/// A reply that streams for minutes unless cancelled.
fn endless_reply() -> Reply {
    let pieces: Vec<String> = (0..2000).map(|i| format!("drip{i:04} ")).collect();
    slow_text(&pieces, 200)
}

/// Every file under `dir` whose name ends with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    files_under(dir, |p| p.to_string_lossy().ends_with(suffix))
}

/// The pane's last rows are the live region: the rule, the prompt and the status line, each
/// whole at the start of its row.
fn assert_live_region_intact(screen: &str) {
    let rows: Vec<&str> = screen.trim_end().lines().collect();
    let status = rows.last().copied().unwrap_or_default();
    assert!(
        status.starts_with("test-model ·"),
        "the status line is not intact:\n{screen}"
    );
    assert!(
        rows.iter().any(|r| r.starts_with("› ")),
        "no prompt row:\n{screen}"
    );
}

#[test]
fn stderr_warnings_and_mcp_notices_are_notice_lines_and_the_screen_stays_intact() {
    let server = format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        everything_js().display().to_string()
    );
    let (env, _mock) = setup(vec![text_reply("still answering")], &server);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    // server-everything registers a tool once initialized and says so with
    // `notifications/tools/list_changed`: the same harness_note a --stdio client gets.
    let s = pane.wait_text("says its tools changed");
    assert!(s.contains("note: MCP server everything"), "{s}");
    // Its stderr ("Starting default (STDIO) server...") went to the session's MCP log.
    assert!(!s.contains("Starting default"), "{s}");
    let logs = files_ending(&env.home, ".mcp.log");
    assert_eq!(logs.len(), 1, "one MCP log: {logs:?}");
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(log.contains("Starting default (STDIO) server"), "{log}");

    // A broken project config read by `/reload` while the UI runs: the problem is a note line
    // of its own (once: not also a copy on stderr), the live region is drawn whole under it.
    env.project_config("this is [[ not toml\n");
    pane.type_text("/reload");
    pane.keys(&["Enter"]);
    pane.wait_text("reloaded:");
    pane.wait_for("the reload's problem as a note line of its own", |s| {
        s.lines()
            .any(|r| r.starts_with("note: hooks and MCP servers not re-read"))
    });
    let screen = pane.screen();
    assert_live_region_intact(&screen);
    assert_eq!(
        count(&pane.history(), "hooks and MCP servers not re-read"),
        1,
        "{}",
        pane.history()
    );
    // The session goes on: a prompt still streams its reply into an intact screen.
    pane.type_text("are you there");
    pane.keys(&["Enter"]);
    pane.wait_for("the reply and an idle prompt", |s| {
        s.contains("still answering") && !s.contains("working")
    });
    assert_live_region_intact(&pane.screen());
    let h = pane.history();
    assert!(
        !h.contains("Starting default"),
        "an MCP server's stderr reached the terminal:\n{h}"
    );
    pane.keys(&["C-d"]);
    let (code, restored) = pane.wait_exit();
    assert_eq!(code, 0, "{}", pane.history());
    assert!(restored, "{}", pane.history());
}

/// How many times `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn an_mcp_server_that_fails_to_start_is_one_note_at_start_and_one_per_reload() {
    let server = "[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n";
    let (env, _mock) = setup(vec![], server);
    let pane = Pane::start(&env, &[], 100, 30);
    pane.wait_text("test-model");
    pane.wait_text("MCP server broken");
    pane.type_text("/reload");
    pane.keys(&["Enter"]);
    pane.wait_text("reloaded:");
    // The reload's own note comes with its receipt; give a second copy time to show.
    pane.wait_for("the reload's note", |_| {
        count(&pane.history(), "MCP server broken") >= 2
    });
    pane.type_text("/help");
    pane.keys(&["Enter"]);
    pane.wait_text("/quit");
    let h = pane.history();
    assert_eq!(
        count(&h, "MCP server broken"),
        2,
        "once at start and once for the reload, each as a note:\n{h}"
    );
    assert_eq!(count(&h, "note: MCP server broken"), 2, "{h}");
    pane.keys(&["C-d"]);
    let (code, _) = pane.wait_exit();
    assert_eq!(code, 0, "{}", pane.history());
}

#[test]
fn a_warning_written_before_the_ui_starts_is_a_notice_line_of_the_ui() {
    let (env, mock) = setup(vec![text_reply("the first answer")], "");
    let mut s = env.stdio(&[]);
    s.user("the first question");
    s.turn();
    let sid = s.hello["session_id"].as_str().unwrap().to_string();
    s.finish();
    // A torn last line, as an interrupted write leaves it: resuming warns about it on stderr
    // before the UI takes the terminal.
    let record = env.record_path(&sid);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&record)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"v\":1,\"rec\":\"mess").unwrap();
    drop(f);
    // Wide enough for the warning (with its long path) to fit one row.
    let pane = Pane::start(&env, &["--continue"], 250, 30);
    pane.wait_text("the first answer");
    pane.wait_text("ignored a torn last line");
    assert_live_region_intact(&pane.screen());
    // Drawn by the UI as a warning notice (bold yellow), not printed raw before it.
    let styled = pane.history_styled();
    let row = styled
        .lines()
        .find(|l| l.contains("ignored a torn last line"))
        .unwrap();
    assert!(
        row.starts_with('\x1b') && bold(row),
        "not a warning notice row (bold, coloured): {row:?}"
    );
    assert_eq!(count(&pane.history(), "ignored a torn last line"), 1);
    pane.keys(&["C-d"]);
    let (code, restored) = pane.wait_exit();
    assert_eq!(code, 0, "{}", pane.history());
    assert!(restored);
    drop(mock);
}

/// Send `signal` to openmax mid-stream; the turn ends cancelled, the terminal is given back
/// sane (the shell after it reads a line and runs it) and `--continue` finds the session.
fn signal_mid_stream(signal: i32) {
    let (env, _mock) = setup(vec![endless_reply()], "");
    let pane = Pane::start_then_shell(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("drip please");
    pane.keys(&["Enter"]);
    pane.wait_text("drip0001");
    let pid = pane.openmax_pid();
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(pid, signal) };
    let (code, restored) = pane.wait_exit();
    assert_eq!(code, 0, "{}", pane.history());
    assert!(
        restored,
        "the terminal is not restored:\n{}",
        pane.history()
    );
    assert_eq!(pane.format("#{cursor_flag}"), "1", "the cursor is shown");
    let h = pane.history();
    assert!(h.contains("cancelled"), "the turn was not cancelled:\n{h}");
    assert!(!h.contains("drip1999"), "the stream ran to its end:\n{h}");
    // The shell reads the terminal in canonical mode with echo: a typed line runs.
    pane.type_text("echo \"sh-$((6*7))\"");
    pane.keys(&["Enter"]);
    pane.wait_text("sh-42");
    // No bracketed paste left on: tmux pastes without the markers, so the line runs as typed
    // (with them the shell would look for a command named `ESC[200~echo`).
    pane.paste("echo \"pa-$((2+3))\"");
    pane.keys(&["Enter"]);
    pane.wait_text("pa-5");
    drop(pane);
    // The session file is whole: --continue resumes it with the prompt in its history.
    let mut s = env.stdio(&["--continue"]);
    let t = s.event();
    assert_eq!(t["type"], "transcript", "{t}");
    assert!(t.to_string().contains("drip please"), "{t}");
    let (code, _events, stderr) = s.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn sigterm_mid_stream_cancels_the_turn_and_gives_the_shell_a_sane_terminal() {
    signal_mid_stream(libc::SIGTERM);
}

#[test]
fn sighup_mid_stream_cancels_the_turn_and_gives_the_shell_a_sane_terminal() {
    signal_mid_stream(libc::SIGHUP);
}

#[test]
fn a_second_sigterm_while_the_first_waits_exits_130_with_the_terminal_restored() {
    // A server that starts once, then on `/reload` never answers `initialize` (for ten
    // minutes): the reload holds every later command, the first signal's `quit` included.
    let env = TestEnv::new();
    let hang = env.root.join("hang");
    let server = format!(
        "[mcp_servers.sticky]\ncommand = \"sh\"\nargs = [\"-c\", {:?}]\nstartup_timeout_s = 600\n",
        format!(
            "if [ -e '{}' ]; then exec sleep 600; fi; exec node '{}' stdio",
            hang.display(),
            everything_js().display()
        )
    );
    let (env, _mock) = setup_in(env, vec![], &server);
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    std::fs::write(&hang, "").unwrap();
    pane.type_text("/reload");
    pane.keys(&["Enter"]);
    let pid = pane.openmax_pid();
    // Wait until the reload's server is running (the hanging `sleep`), so the reload is in
    // flight when the signals come.
    wait_until(
        "the reload's server to start",
        || descendants(pid).iter().any(|(_, c)| c == "sleep"),
        || {
            let logs: Vec<String> = files_ending(&env.home, ".mcp.log")
                .iter()
                .map(|p| std::fs::read_to_string(p).unwrap_or_default())
                .collect();
            format!("{:?}\n{logs:?}\n{}", descendants(pid), pane.history())
        },
    );
    // The first server (node) and the reload's (the hanging sleep), both tracked MCP groups.
    let servers = descendants(pid);
    assert!(
        servers.iter().any(|(_, c)| c == "node"),
        "the first server runs: {servers:?}"
    );
    assert!(
        !running_records(&env.home).is_empty(),
        "the servers' groups are recorded"
    );
    // SAFETY: plain kill(2)s of processes this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    pane.wait_text("stopping");
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let (code, restored) = pane.wait_exit();
    // The forced exit kills the MCP servers' process groups itself and removes their records,
    // rather than leaving them to the next start's sweep.
    let left: Vec<&(i32, String)> = servers.iter().filter(|(p, _)| !wait_gone(*p)).collect();
    for (p, _) in &left {
        // SAFETY: as above; a test failure must not leave them running.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "left running after exit 130: {left:?}");
    assert_eq!(
        running_records(&env.home),
        Vec::<PathBuf>::new(),
        "records left for the next start's sweep"
    );
    assert_eq!(code, 130, "{}", pane.history());
    assert!(
        restored,
        "the terminal is not restored:\n{}",
        pane.history()
    );
    assert_eq!(pane.format("#{cursor_flag}"), "1", "the cursor is shown");
}

/// The reaper's records of tracked process groups (`<project state>/running/*`).
fn running_records(home: &Path) -> Vec<PathBuf> {
    files_ending(home, "")
        .into_iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("running")))
        .collect()
}

/// The pid and command name of every descendant of `pid`.
fn descendants(pid: i32) -> Vec<(i32, String)> {
    let out = std::process::Command::new("ps")
        .args(["-e", "-o", "pid=,ppid=,comm="])
        .output()
        .expect("ps runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let procs: Vec<(i32, i32, String)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
                w.next()?.to_string(),
            ))
        })
        .collect();
    let mut found = vec![pid];
    let mut names = Vec::new();
    let mut i = 0;
    while i < found.len() {
        for (p, pp, name) in &procs {
            if *pp == found[i] && !found.contains(p) {
                found.push(*p);
                names.push((*p, name.clone()));
            }
        }
        i += 1;
    }
    names
}

/// Wait until `pred` holds; at the deadline fail with `what` and `show()`.
fn wait_until(what: &str, pred: impl Fn() -> bool, show: impl Fn() -> String) {
    let end = std::time::Instant::now() + DEADLINE;
    while !pred() {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}: {}",
            show()
        );
        std::thread::sleep(std::time::Duration::from_millis(40));
    }
}

/// Whether `pid` is still a live process (not gone, not a zombie waiting for its parent).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

#[test]
fn a_terminal_that_goes_away_mid_stream_ends_the_session_instead_of_spinning() {
    // The pane's shell is the terminal's session leader: when the tmux server dies, the kernel
    // hangs the terminal up and signals that shell, not openmax. openmax must notice the dead
    // terminal itself (its reads return end of file at once, forever), cancel the turn, leave
    // the session resumable and exit, rather than outlive its terminal reading it in a loop.
    let (env, _mock) = setup(vec![endless_reply()], "");
    let pane = Pane::start(&env, &[], 80, 30);
    pane.wait_text("test-model");
    pane.type_text("drip please");
    pane.keys(&["Enter"]);
    pane.wait_text("drip0001");
    let pid = pane.openmax_pid();
    drop(pane);
    let end = std::time::Instant::now() + DEADLINE;
    while alive(pid) && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let still = alive(pid);
    if still {
        // SAFETY: a plain kill(2) of the process this test started, so it does not outlive it.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(!still, "openmax outlived its terminal by {DEADLINE:?}");
    let mut s = env.stdio(&["--continue"]);
    let t = s.event();
    assert_eq!(t["type"], "transcript", "{t}");
    assert!(t.to_string().contains("drip please"), "{t}");
    let (code, _events, stderr) = s.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

/// Whether an SGR sequence of `row` turns bold on (parameter 1, alone or among others).
fn bold(row: &str) -> bool {
    row.split("\x1b[").skip(1).any(|seq| {
        seq.split_once('m')
            .is_some_and(|(params, _)| params.split(';').any(|p| p == "1"))
    })
}

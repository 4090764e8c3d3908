//! A real terminal for the terminal UI's end-to-end tests: `openmax` runs in a tmux pane of a
//! private tmux server (its own socket under the test's temporary root, no user config), keys
//! are typed with `send-keys` and the screen is read with `capture-pane`.
//!
//! Invariants: the pane's process gets a cleared environment (the [`TestEnv`]'s variables,
//! `PATH` and `TERM` only), exactly as [`TestEnv::command`] does; after `openmax` exits the
//! pane prints `[exit CODE]`, the terminal's `icanon`/`echo` settings and stays open, so a test
//! can read how it ended and whether the terminal was restored; every wait has a deadline and a
//! failure prints the whole screen; the server is killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::{deps, TestEnv, DEADLINE};

/// One tmux server with one pane running `openmax ARGS`.
pub struct Pane {
    tmux: PathBuf,
    socket: PathBuf,
    /// The server and every client run as the [`TestEnv`]'s user.
    who: crate::Who,
}

/// Quote `s` for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Pane {
    /// Start `openmax ARGS` in the project of `env`, in a `cols`×`rows` terminal.
    pub fn start(env: &TestEnv, args: &[&str], cols: u16, rows: u16) -> Pane {
        Pane::start_with(env, args, cols, rows, &[])
    }

    /// As [`Pane::start`], with `extra` environment variables for this process only.
    pub fn start_with(
        env: &TestEnv,
        args: &[&str],
        cols: u16,
        rows: u16,
        extra: &[(&str, &str)],
    ) -> Pane {
        Pane::launch(env, &env.project, args, cols, rows, extra, false)
    }

    /// As [`Pane::start`], with `$TMUX` and `$TMUX_PANE` in openmax's environment naming its own
    /// server, as tmux sets them for the process of a pane (the pane script clears the
    /// environment, so they are set again here).
    pub fn start_in_tmux(env: &TestEnv, args: &[&str], cols: u16, rows: u16) -> Pane {
        Pane::launch_with(env, &env.project, args, cols, rows, &[], false, true)
    }

    /// As [`Pane::start`], and once `openmax` exited (and its exit lines are printed) an
    /// interactive `sh` reads the terminal, so a test can check the shell works in it.
    pub fn start_then_shell(env: &TestEnv, args: &[&str], cols: u16, rows: u16) -> Pane {
        Pane::launch(env, &env.project, args, cols, rows, &[], true)
    }

    /// As [`Pane::start`], from the working directory `dir`.
    pub fn start_in(env: &TestEnv, dir: &Path, args: &[&str], cols: u16, rows: u16) -> Pane {
        Pane::launch(env, dir, args, cols, rows, &[], false)
    }

    fn launch(
        env: &TestEnv,
        dir: &Path,
        args: &[&str],
        cols: u16,
        rows: u16,
        extra: &[(&str, &str)],
        shell: bool,
    ) -> Pane {
        Pane::launch_with(env, dir, args, cols, rows, extra, shell, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_with(
        env: &TestEnv,
        dir: &Path,
        args: &[&str],
        cols: u16,
        rows: u16,
        extra: &[(&str, &str)],
        shell: bool,
        tmux_vars: bool,
    ) -> Pane {
        let tmux = deps::tmux();
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = env.root.join(format!("tmux-{n}.sock"));
        let script = env.root.join(format!("pane-{n}.sh"));
        let mut vars = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
            ("HOME".into(), env.home.display().to_string()),
            ("OPENMAX_HOME".into(), env.home.display().to_string()),
            ("TERM".into(), "tmux-256color".into()),
        ];
        vars.extend(env.env.iter().cloned());
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        if tmux_vars {
            // The client reads only the socket path; the server's pid is informational.
            vars.push(("TMUX".into(), format!("{},0,0", socket.display())));
            vars.push(("TMUX_PANE".into(), "%0".into()));
        }
        let assigns: Vec<String> = vars
            .iter()
            .map(|(k, v)| format!("{k}={}", sh_quote(v)))
            .collect();
        let argv: Vec<String> = args.iter().map(|a| sh_quote(a)).collect();
        let text = format!(
            "#!/bin/sh\ncd {dir} || exit 99\nenv -i {assigns} {bin} {argv}\ncode=$?\n\
             printf '\\n[exit %s]\\n' \"$code\"\n\
             stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '\n\
             printf '[end]\\n'\nexec {tail}\n",
            dir = sh_quote(&dir.display().to_string()),
            assigns = assigns.join(" "),
            bin = sh_quote(&env.who.openmax().display().to_string()),
            argv = argv.join(" "),
            tail = if shell { "sh -i" } else { "sleep 3600" },
        );
        std::fs::write(&script, text).expect("write the pane script");
        env.who.own(&env.root);
        let pane = Pane {
            tmux,
            socket,
            who: env.who,
        };
        pane.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            "sh",
            &script.display().to_string(),
        ]);
        pane
    }

    fn tmux(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(&self.tmux);
        cmd.arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            // A command given as one string runs through tmux's default shell, which is
            // $SHELL or else the user's login shell: the ordinary test user's is nologin.
            .env("SHELL", "/bin/sh");
        self.who.apply(&mut cmd);
        let out = cmd.output().expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The server's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Type `text` literally.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "t", "-l", text]);
    }

    /// Press tmux-named keys (`Enter`, `Escape`, `BTab`, `C-d`, `Up`, …).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// The visible screen, one string per row (trailing spaces trimmed).
    pub fn screen(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", "t"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The scrollback and the screen with their styles as escape sequences (`capture-pane -e`).
    pub fn history_styled(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-e", "-t", "t", "-S", "-3000"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Paste `text` as the terminal would (bracketed, when the program asked for it).
    pub fn paste(&self, text: &str) {
        let file = self.socket.with_extension("paste");
        std::fs::write(&file, text).expect("write the paste buffer");
        self.tmux(&["load-buffer", "-b", "p", &file.display().to_string()]);
        self.tmux(&["paste-buffer", "-p", "-d", "-b", "p", "-t", "t"]);
        let _ = std::fs::remove_file(file);
    }

    /// The scrollback and the screen.
    pub fn history(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", "t", "-S", "-3000"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A tmux format of the pane (`#{cursor_flag}`, `#{pane_width}`, …).
    pub fn format(&self, f: &str) -> String {
        let out = self.tmux(&["display-message", "-p", "-t", "t", f]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The pid of `openmax` (the pane's shell's child), once it runs.
    pub fn openmax_pid(&self) -> i32 {
        let shell = self.format("#{pane_pid}");
        let end = Instant::now() + DEADLINE;
        loop {
            let out = Command::new("ps")
                .args(["-o", "pid=,comm=", "--ppid", &shell])
                .output()
                .expect("ps runs");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if let Some(pid) = text
                .lines()
                .find(|l| l.contains("openmax"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|p| p.parse().ok())
            {
                return pid;
            }
            assert!(
                Instant::now() < end,
                "no openmax under the pane's shell: {text}"
            );
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// Resize the window to `cols`×`rows`.
    pub fn resize(&self, cols: u16, rows: u16) {
        self.tmux(&[
            "resize-window",
            "-t",
            "t",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
        ]);
    }

    /// Wait until the scrollback and screen satisfy `pred`; returns them. Fails with the whole
    /// screen at the deadline.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let h = self.history();
            if pred(&h) {
                return h;
            }
            if Instant::now() > end {
                panic!("timed out waiting for {what}; the terminal shows:\n{h}");
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// Wait until the visible screen alone (no scrollback) satisfies `pred`; returns it.
    pub fn wait_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            if Instant::now() > end {
                panic!("timed out waiting for {what} on screen; it shows:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// Wait until the terminal shows `text`.
    pub fn wait_text(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?}"), |s| s.contains(text))
    }

    /// Wait for `openmax` to exit; returns its exit code and whether the terminal was restored
    /// (canonical mode and echo back on).
    pub fn wait_exit(&self) -> (i32, bool) {
        let h = self.wait_for("openmax to exit", |s| s.contains("[end]"));
        let tail = &h[h.rfind("[exit ").expect("an exit line")..];
        let code: i32 = tail["[exit ".len()..tail.find(']').unwrap()]
            .parse()
            .expect("a numeric exit code");
        let restored = tail.contains(" icanon") || tail.contains("\nicanon");
        let restored = restored && !tail.contains("-icanon") && !tail.contains("-echo");
        (code, restored)
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let mut cmd = Command::new(&self.tmux);
        cmd.arg("-S").arg(&self.socket).arg("kill-server");
        self.who.apply(&mut cmd);
        let _ = cmd.output();
    }
}

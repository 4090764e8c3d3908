//! The interactive terminal UI, `openmax` on a terminal: a third frontend of the same runtime
//! and core as `--stdio` and `-p`. It consumes the core's wire events and sends the same
//! commands (`user`, `approve`, `approval_mode`, `reload`, `cancel`, `quit`), so every turn
//! guarantee holds here by construction, and it decides no policy.
//!
//! - [`view`] and [`keys`]: the pure view model (events and keys in; finished blocks, the live
//!   region's state and commands out), with [`editor`] for the prompt being typed.
//! - [`blocks`], [`card`], [`markdown`], [`live`], [`wrap`], [`theme`]: drawing the model as
//!   styled rows at a width (pure, tested with ratatui's test backend).
//! - [`term`]: the terminal itself (raw mode, inline viewport, restore on every exit).
//! - [`capture`]: fd 2 from before the session opens until the UI gives the terminal back
//!   (each line a notice, never raw text; see [`Early`]).
//! - [`signals`]: SIGTERM, SIGHUP and SIGINT answered as a person stopping the session.
//! - [`history`]: this project's earlier prompts.
//!
//! Threads: the runtime runs on the calling thread as for `--stdio`; its sink forwards each
//! event over a channel to the UI thread, which owns the terminal, reads keys, draws at most
//! one frame per [`FRAME`] for events (a key's echo is drawn at once) and sends commands into
//! the runtime's input channel, exactly where the `--stdio` reader would put a command line.
//! The tool sources' notices (an MCP server's `tools/list_changed`) reach the core as for
//! `--stdio` and come back as `harness_note` events.

pub mod attach;
pub mod blocks;
pub mod capture;
pub mod card;
pub mod editor;
pub mod history;
pub mod keys;
pub mod live;
pub mod markdown;
pub mod requests;
pub mod signals;
pub mod slash;
pub mod term;
pub mod theme;
pub mod undo;
pub mod view;
pub mod wrap;

#[cfg(test)]
mod card_tests;
#[cfg(test)]
mod view_tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crossterm::event::{self as cev, Event as TermEvent};
use openmax_core::machine::Input;
use openmax_core::wire::{Command, Event, Mode, Transcript};
use openmax_core::Core;

use crate::run::Sink;
use crate::run::{Backend, InputTx, Runtime, SignalPolicy};

pub use term::restore;

/// The shortest time between two frames: at most 60 frames a second, however fast events come.
pub const FRAME: Duration = Duration::from_millis(16);
/// How long the UI waits for a key before looking at the core's events again.
const POLL: Duration = Duration::from_millis(8);
/// How often the working indicator and a retry's wait are redrawn.
const ANIMATE: Duration = Duration::from_millis(100);

/// What the TUI needs to know of the session it shows.
pub struct Launch {
    pub model: String,
    pub mode: Mode,
    /// The session's id.
    pub session_id: String,
    /// The `transcript` of a continued session.
    pub transcript: Option<Transcript>,
    /// A continued session's history as it happened (read from its record), shown in place of
    /// the transcript's text when there is one.
    pub past: Option<(Vec<crate::session::replay::Past>, bool)>,
    /// The project's state, for `/resume`'s list of sessions.
    pub state: crate::session::ProjectState,
    /// This project's prompt history file.
    pub history: PathBuf,
    /// Notices of the tool sources (MCP `tools/list_changed`), for the core.
    pub notices: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
    /// `$OPENMAX_HOME`: the project's pending sources and `/approve` read its config.
    pub home: PathBuf,
    /// The provider requests go to (`/model` switches its model).
    pub provider: crate::provider::Provider,
    /// The sandbox agent processes run in (`/status`).
    pub sandbox: Arc<crate::sandbox::Policy>,
    /// The running `task` calls (each one's live line).
    pub tasks: crate::tasks::progress::Board,
    /// Whether the project was trusted when the session opened.
    pub trusted: bool,
    /// The user config's `[provider]` prices (the status line and `/cost` show the cost).
    pub prices: Option<openmax_core::usage::Prices>,
    /// Resolves a typed prompt's images, MCP mentions and MCP prompt commands.
    pub attach: Option<attach::Attach>,
    /// The project's checkpoints and this session's id, for `/undo` (`None`: checkpoints off).
    pub undo: Option<(crate::checkpoint::Project, String)>,
}

/// What reaches the UI thread.
enum Msg {
    Event(Event),
    /// A line written to stderr while the UI holds the terminal.
    Stderr(String),
    Signal(signals::Signal),
    /// The runtime finished: draw what is left and give the terminal back.
    Exit,
}

/// The runtime's sink: every event to the UI thread.
struct ChannelSink {
    tx: mpsc::Sender<Msg>,
    gone: bool,
}

impl Sink for ChannelSink {
    fn event(&mut self, event: Event) {
        if self.tx.send(Msg::Event(event)).is_err() {
            self.gone = true;
        }
    }
    fn flush(&mut self) {}
    fn client_gone(&self) -> bool {
        self.gone
    }
}

/// How long the exit waits for the last lines written to stderr to reach the screen.
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// fd 2 captured from before the session opens, so the start-up's warnings (a torn session
/// record, processes left by an earlier openmax, the demo project's place) are notice lines of
/// the UI like every later one, drawn in order and with terminal controls made inert, instead
/// of raw text above it. Lines wait on the UI's own channel until it starts; if it never does,
/// [`Early::abandon`] gives fd 2 back and writes them out, so no warning is lost.
pub struct Early {
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
    capture: Result<capture::Capture, String>,
}

impl Early {
    /// Capture fd 2 now. A panic before the UI takes the terminal gives fd 2 back first, so
    /// its message is printed.
    pub fn start() -> Early {
        let (tx, rx) = mpsc::channel();
        let to_ui = tx.clone();
        let capture = capture::start(move |line| {
            let _ = to_ui.send(Msg::Stderr(line));
        })
        .map_err(|e| e.to_string());
        if capture.is_ok() {
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                capture::give_back();
                prev(info);
            }));
        }
        Early { tx, rx, capture }
    }

    /// The UI will not start: give fd 2 back and write what was captured to it.
    pub fn abandon(self) {
        if let Ok(c) = self.capture {
            c.finish(STDERR_DRAIN);
        }
        for msg in self.rx.try_iter() {
            if let Msg::Stderr(line) = msg {
                eprintln!("{line}");
            }
        }
    }
}

/// How a TUI session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The exit code.
    pub code: i32,
    /// Where to go next: a session picked with `/resume`, or a fresh one (`/new`).
    pub next: Option<view::Next>,
}

/// Run the session under the TUI until the core exits. `early` is stderr as captured since
/// before the session opened.
pub fn run(
    rt: &tokio::runtime::Runtime,
    core: Core,
    backend: Backend,
    launch: Launch,
    early: Early,
) -> Ended {
    let ended = |code| Ended { code, next: None };
    run_inner(rt, core, backend, launch, early, ended)
}

fn run_inner(
    rt: &tokio::runtime::Runtime,
    core: Core,
    backend: Backend,
    mut launch: Launch,
    early: Early,
    ended: impl Fn(i32) -> Ended,
) -> Ended {
    let Early {
        tx,
        rx,
        capture: captured,
    } = early;
    let sink = ChannelSink {
        tx: tx.clone(),
        gone: false,
    };
    let mut runtime = Runtime::new(core, backend, sink);
    // The person is there from the first frame: start the session now (an early `Timeout`
    // does nothing else), so the freeze's notes (an MCP server that did not start, a broken
    // manifest) and the session_start hooks come at launch, not with the first key.
    runtime.push_input(Input::Timeout);
    if let Some(notices) = launch.notices.take() {
        runtime.forward_notices(notices);
    }
    let tell = tx.clone();
    if let Err(e) = signals::install(rt, move |s| {
        let _ = tell.send(Msg::Signal(s));
    }) {
        eprintln!("openmax: signals end input as for --stdio ({e})");
        runtime.handle_signals(SignalPolicy::EndInput);
        runtime.before_forced_exit(restore);
    }
    let input = runtime.sender();
    if let Err(e) = term::enter() {
        restore();
        Early {
            tx,
            rx,
            capture: captured,
        }
        .abandon();
        eprintln!("openmax: could not take the terminal: {e}");
        return ended(1);
    }
    let capture = match captured {
        Ok(c) => Some(c),
        Err(e) => {
            let _ = tx.send(Msg::Stderr(format!(
                "openmax: stderr is not captured ({e}); a warning may be drawn over the screen"
            )));
            None
        }
    };
    let hung_up = watch_hangup(&input);
    let ui = std::thread::spawn(move || {
        let _on_panic = EndOnPanic(input.clone());
        ui_loop(rx, &input, launch)
    });
    let (code, _sink) = rt.block_on(runtime.run());
    // Every line written to stderr until now is on the channel ahead of `Exit`.
    if let Some(c) = capture {
        c.finish(STDERR_DRAIN);
    }
    let _ = tx.send(Msg::Exit);
    if hung_up.load(Ordering::SeqCst) {
        // Nobody is left to see the screen, and the UI thread may be stuck in the terminal
        // library's read of the dead terminal: exit without waiting for it.
        restore();
        return ended(code);
    }
    let ui = ui.join();
    restore();
    match ui {
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => ended(code),
        Ok(Ok(next)) => Ended { code, next },
        Ok(Err(e)) => {
            eprintln!("openmax: the terminal failed: {e}");
            ended(if code == 0 { 1 } else { code })
        }
        Err(_) => ended(101),
    }
}

/// Carry out a `/undo` request of the view (file work on this thread: the runtime's loop
/// goes on meanwhile); a done undo is told to the core as a note.
fn undo_ask(
    undo: Option<&(crate::checkpoint::Project, String)>,
    ask: undo::UndoAsk,
    view: &mut view::View,
    input: &InputTx,
) {
    use crate::checkpoint::undo::{self as u, Pick};
    let Some((p, session)) = undo else {
        return view.undo_planned(Err(
            "checkpoints are off in this session ([checkpoints] enabled = false)".into(),
        ));
    };
    let pick = |turn: Option<u64>| turn.map(Pick::Turn).unwrap_or(Pick::Last);
    match ask {
        undo::UndoAsk::Preview { turn, force } => {
            let card = u::plan(p, session, pick(turn), force)
                .map(|plan| undo::UndoCard::of(&plan, turn, force))
                .map_err(|e| e.message().to_string());
            view.undo_planned(card);
        }
        undo::UndoAsk::Apply { turn, force } => match u::run(p, session, pick(turn), force) {
            Ok(report) => {
                let _ = input.send(Input::Notice {
                    text: u::note(&report, "/undo"),
                });
                view.undo_done(Ok(crate::checkpoint::report::report_text(&report)));
            }
            Err(e) => view.undo_done(Err(e.message().to_string())),
        },
        undo::UndoAsk::List => match u::entries(p, session) {
            Ok(entries) if entries.is_empty() => {
                view.info("no checkpoint in this session yet: none of its turns wrote a file")
            }
            Ok(entries) => {
                let lines: Vec<String> = entries
                    .iter()
                    .map(|e| crate::checkpoint::list::line(p, e))
                    .collect();
                view.info(&lines.join("\n"));
            }
            Err(e) => view.info(&format!("undo: {}", e.message())),
        },
    }
}

/// Held by the UI thread: if it panics (the panic hook has already given the terminal back),
/// the running turn is cancelled and input ended, as on a hang-up, so the session drains and
/// the process exits (101) instead of waiting for keys nobody can type any more.
struct EndOnPanic(InputTx);

impl Drop for EndOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.send(Input::Line(Command::Cancel.to_line()));
            let _ = self.0.send(Input::EndOfInput);
        }
    }
}

/// Watch the terminal for a hang-up on a thread of its own: when the terminal goes away with
/// no signal reaching openmax (the shell that owned it got the SIGHUP, or ignored it), the
/// running turn is cancelled and input ended, exactly as after a SIGHUP, so the session drains
/// and the process exits instead of outliving its terminal. The returned flag says it happened.
fn watch_hangup(input: &InputTx) -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let (seen, input) = (flag.clone(), input.clone());
    let watcher = std::thread::Builder::new()
        .name("hangup".into())
        .spawn(move || {
            if term::wait_hangup() {
                seen.store(true, Ordering::SeqCst);
                let _ = input.send(Input::Line(Command::Cancel.to_line()));
                let _ = input.send(Input::EndOfInput);
            }
        });
    if let Err(e) = watcher {
        eprintln!("openmax: a closed terminal will not end the session by itself ({e})");
    }
    flag
}

/// The UI thread: its view, its screen, until the runtime exits; where to go next (`/resume`,
/// `/new`), if anywhere. When the terminal fails (it hung up, say) the running turn is
/// cancelled and input ended, so the session drains.
fn ui_loop(
    rx: mpsc::Receiver<Msg>,
    input: &InputTx,
    launch: Launch,
) -> std::io::Result<Option<view::Next>> {
    let mut view = view::View::new(&launch.model, launch.mode, history::load(&launch.history));
    view.tasks = launch.tasks.clone();
    view.status.prices = launch.prices;
    match (&launch.past, &launch.transcript) {
        (Some((items, older)), Some(_)) => view.replay(items, *older),
        (_, Some(t)) => view.transcript(&t.messages, t.truncated),
        _ => {}
    }
    match requests::startup(&launch) {
        Ok(questions) => view.ask(questions),
        Err(why) if !(launch.trusted || launch.state.trusted()) => view.notice(
            blocks::Level::Warn,
            &format!(
                "{} is not trusted: prompts are refused and nothing runs ({why})",
                launch.state.project().display()
            ),
        ),
        Err(_) => {}
    }
    let r = draw_loop(&rx, input, &launch, &mut view);
    if r.is_err() {
        if view.running.is_some() {
            let _ = input.send(Input::Line(Command::Cancel.to_line()));
        }
        let _ = input.send(Input::EndOfInput);
    }
    r.map(|()| view.next.take())
}

/// The `/resume` picker's lines: this project's sessions but this one.
fn picker_items(launch: &Launch) -> Vec<(String, String)> {
    let rows = crate::session::list::rows(&launch.state).unwrap_or_default();
    rows.into_iter()
        .filter(|r| r.id != launch.session_id)
        .map(|r| {
            let line = format!(
                "{}  {}  {} turn{}{}  {}",
                r.id,
                crate::session::list::utc_minutes(r.last_used_ms),
                r.turns.map(|t| t.to_string()).unwrap_or_else(|| "?".into()),
                if r.turns == Some(1) { "" } else { "s" },
                if r.live { "  (live)" } else { "" },
                r.first_prompt.unwrap_or_default()
            );
            (r.id, line)
        })
        .collect()
}

fn draw_loop(
    rx: &mpsc::Receiver<Msg>,
    input: &InputTx,
    launch: &Launch,
    view: &mut view::View,
) -> std::io::Result<()> {
    let theme = theme::Theme::from_env();
    let start = Instant::now();
    let ms = |at: Instant| at.duration_since(start).as_millis() as u64;
    let mut screen = term::Screen::new(theme)?;
    let mut dirty = true;
    // A key or paste was read since the last frame: its echo is drawn at once, not held to
    // the frame budget (keys are rare, so the rate stays bounded by the typist).
    let mut typed = false;
    let mut last_draw: Option<Instant> = None;
    let mut carrier = requests::Carrier::default();
    loop {
        let mut exit = false;
        loop {
            match rx.try_recv() {
                Ok(Msg::Event(ev)) => {
                    view.event(ms(Instant::now()), ev);
                    dirty = true;
                }
                Ok(Msg::Stderr(line)) => {
                    view.stderr_line(&line);
                    dirty = true;
                }
                Ok(Msg::Signal(s)) => {
                    view.signal(s.name());
                    dirty = true;
                }
                Ok(Msg::Exit) | Err(mpsc::TryRecvError::Disconnected) => {
                    exit = true;
                    break;
                }
                Err(mpsc::TryRecvError::Empty) => break,
            }
        }
        if exit {
            screen.draw(view, ms(Instant::now()))?;
            return screen.leave(view);
        }
        if view.wants_sessions {
            view.open_picker(picker_items(launch));
            dirty = true;
        }
        for req in view.take_requests() {
            carrier.carry(req, launch, view, input);
            dirty = true;
        }
        for ask in view.take_undo_asks() {
            undo_ask(launch.undo.as_ref(), ask, view, input);
            dirty = true;
        }
        for cmd in view.take_commands() {
            if let Command::User { text } = &cmd {
                history::append(&launch.history, text);
                if let Some(a) = &launch.attach {
                    match a.prompt(text) {
                        Ok(i) => {
                            let _ = input.send(i);
                        }
                        Err(e) => view.prompt_failed(&e),
                    }
                    continue;
                }
            }
            let _ = input.send(Input::Line(cmd.to_line()));
        }
        let now = Instant::now();
        let since = last_draw.map(|t| now - t);
        let animating = view.running.is_some() || view.retry.is_some();
        if animating && since.is_some_and(|s| s >= ANIMATE) {
            dirty = true;
        }
        let due = typed || since.is_none_or(|s| s >= FRAME);
        if dirty && due {
            screen.draw(view, ms(now))?;
            last_draw = Some(now);
            dirty = false;
            typed = false;
        }
        let wait = match since {
            Some(s) if dirty && s < FRAME => (FRAME - s).min(POLL),
            _ => POLL,
        };
        // The terminal library reads a hung-up terminal in a loop that never returns, so look
        // before every wait for a key.
        if term::hung_up() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the terminal hung up",
            ));
        }
        if cev::poll(wait)? {
            loop {
                match cev::read()? {
                    TermEvent::Key(k) => {
                        view.key(ms(Instant::now()), k);
                        typed = true;
                    }
                    TermEvent::Paste(s) => {
                        view.paste(&s);
                        typed = true;
                    }
                    _ => {}
                }
                dirty = true;
                if !cev::poll(Duration::ZERO)? {
                    break;
                }
            }
        }
    }
}

//! A session under `--stdio` or the terminal UI: opened ([`crate::start::open`]), handed to
//! its frontend, run to its end; the exit code. (`-p` runs in [`super::print`], ACP in
//! [`crate::frontend::acp`].)

use super::cli::{self, Cli};
use super::fail;
use crate::frontend::JsonlSink;
use crate::run::{Runtime, SignalPolicy};
use crate::start::{handshake, open, Opened, Opener, Resume};

/// Which frontend a session runs under (`-p` runs in [`super::print`]).
pub(super) enum Front {
    Stdio,
    Tui,
}

/// The terminal UI's sessions: the one asked for, then each one picked with `/resume`, until
/// the person quits. After the terminal is given back, one line says how to come back.
fn tui_session(cli: &Cli, rt: &tokio::runtime::Runtime, mut resume: Resume) -> i32 {
    loop {
        // The start-up's stderr becomes the UI's own notice lines.
        let early = crate::frontend::tui::Early::start();
        let opened = match rt.block_on(open(&cli.flags(), None, resume, Opener::Tui, Vec::new())) {
            Ok(o) => o,
            Err(e) => {
                early.abandon();
                eprintln!("openmax: {}", e.message);
                return e.code;
            }
        };
        let Opened {
            core,
            mut backend,
            session_id,
            transcript,
            mode,
            model,
            prompt_history,
            notices,
            state,
            trusted,
            home,
            checkpoints,
            prices,
            ..
        } = opened;
        if let Err(e) = backend.settle_session() {
            early.abandon();
            return fail(format!("could not start a session: {e}"));
        }
        let past = transcript.as_ref().and_then(|_| {
            crate::session::replay::read(&state.sessions_dir().join(format!("{session_id}.jsonl")))
                .ok()
        });
        let launch = crate::frontend::tui::Launch {
            model,
            mode,
            session_id: session_id.clone(),
            transcript,
            past,
            state: state.clone(),
            history: prompt_history,
            notices: Some(notices),
            home,
            provider: backend.provider().clone(),
            sandbox: backend.sandbox_policy(),
            tasks: backend.task_board(),
            trusted,
            prices,
            undo: checkpoints.map(|p| (p, session_id.clone())),
            attach: Some(crate::frontend::tui::attach::Attach {
                project: backend.project().to_path_buf(),
                mcp: backend.mcp_view(),
                runtime: rt.handle().clone(),
            }),
        };
        let ended = crate::frontend::tui::run(rt, core, backend, launch, early);
        crate::sandbox::reaper::sweep();
        match ended.next {
            Some(crate::frontend::tui::view::Next::Resume(id)) if ended.code == 0 => {
                resume = Resume::Prefix(id)
            }
            Some(crate::frontend::tui::view::Next::New) if ended.code == 0 => resume = Resume::New,
            _ => {
                let kept = crate::session::index::read_index(&state.sessions_dir())
                    .is_ok_and(|i| i.sessions.iter().any(|e| e.id == session_id && e.used()));
                if kept {
                    println!("openmax: session {session_id}; continue it with: openmax --resume {session_id}");
                }
                return ended.code;
            }
        }
    }
}

pub(super) fn session(cli: &Cli, front: Front, pick: cli::Pick) -> i32 {
    let resume = pick.resume();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(format!("could not start the runtime: {e}")),
    };
    let code = match front {
        Front::Tui => tui_session(cli, &rt, resume),
        Front::Stdio => stdio_session(cli, &rt, resume),
    };
    rt.shutdown_background();
    crate::sandbox::reaper::sweep();
    code
}

/// A `--stdio` session: `hello` (and `transcript` for a resumed one) first, then the runtime
/// fed by the command reader on stdin until the client quits.
fn stdio_session(cli: &Cli, rt: &tokio::runtime::Runtime, resume: Resume) -> i32 {
    let Opened {
        core,
        mut backend,
        session_id,
        project,
        transcript,
        notices,
        ..
    } = match rt.block_on(open(&cli.flags(), None, resume, Opener::Stdio, Vec::new())) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("openmax: {}", e.message);
            return e.code;
        }
    };
    let mut sink = JsonlSink::new(&session_id, std::io::stdout());
    for line in handshake(&session_id, &project, transcript.as_ref()) {
        sink.raw_line(&line);
    }
    // The header's flushes and the index update wait until `hello` is out: the first line does
    // not need them, and nothing reported finished depends on them.
    if let Err(e) = backend.settle_session() {
        eprintln!("openmax: could not start a session: {e}");
        return 1;
    }
    let mut runtime = Runtime::new(core, backend, sink);
    runtime.forward_notices(notices);
    runtime.handle_signals(SignalPolicy::EndInput);
    let tx = runtime.sender();
    std::thread::spawn(move || {
        crate::frontend::framing::pump(std::io::stdin().lock(), |input| tx.send(input).is_ok())
    });
    let (code, _sink) = rt.block_on(runtime.run());
    code
}

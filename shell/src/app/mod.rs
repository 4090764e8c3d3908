//! What one invocation of `openmax` does, from parsed flags to an exit code: a dispatcher. The
//! one-shot actions (`actions`, `--check`, `--spec`, [`undo`]) run and exit; a session is
//! opened by [`crate::start`] and handed to its frontend: `--stdio` and the terminal UI
//! (`session`), `-p` ([`print`]), ACP ([`crate::frontend::acp`]). No frontend imports this
//! module: each gets what it needs as data.
//!
//! Invariants:
//! - Every failure before the handshake is one clear stderr line and a nonzero exit, and nothing
//!   is written to stdout.
//! - `hello` is the first stdout line, written before stdin is read; `transcript` follows it
//!   only for `--continue`.
//! - Only a human can trust a project or approve a source ([`crate::human::check`]: no
//!   `OPENMAX_AGENT_SESSION`, a terminal on stdin, no openmax ancestor).
//! - No descendant of a session outlives openmax's exit.

mod actions;
pub mod cli;
pub mod print;
mod session;
pub mod undo;

use cli::{Action, Cli};
use session::Front;

/// Run the invocation; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    let action = match cli.action() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("openmax: {e} (see openmax --help)");
            return crate::exit::USAGE;
        }
    };
    match action {
        Action::Check => {
            crate::oneshot::check::run(std::io::stdin().lock(), std::io::stdout().lock())
        }
        Action::Spec { json } => crate::oneshot::spec::run(json, std::io::stdout().lock()),
        Action::Trust => actions::trust(&cli),
        Action::McpList => actions::mcp_list(&cli),
        Action::SandboxCheck => actions::sandbox_check(&cli),
        Action::Undo(args) => undo::run(&cli, args),
        Action::Approve { path } => actions::approve(&cli, &path),
        Action::Stdio { pick } => session::session(&cli, Front::Stdio, pick),
        Action::Acp => crate::frontend::acp::run(cli.flags()),
        Action::Print { prompt, pick, opts } => print::run(&cli, &prompt, pick, &opts),
        Action::Sessions { json, all } => actions::sessions_list(&cli, json, all),
        Action::SessionsRepair => actions::sessions_repair(&cli),
        Action::Tui { pick } => {
            use std::io::IsTerminal;
            if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
                return fail(
                    "no terminal on stdin and stdout for the interactive UI: use --stdio for \
                     the JSONL protocol or -p PROMPT for one turn (see --help)",
                );
            }
            session::session(&cli, Front::Tui, pick)
        }
    }
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("openmax: {msg}");
    1
}

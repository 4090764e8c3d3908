//! Every exit code of `openmax`, in one table: the constants the code returns, and the lines
//! `--help` prints. The README's "Exit codes" table says the same in more words (a test checks
//! that both list exactly these codes).
//!
//! The core decides 0, 1 and 4 for a turn (`StopReason::print_exit_code` for `-p`, the
//! contract's rule for `--stdio`); the shell adds the rest.

/// Success: the session ended; for `-p`, the turn ended normally.
pub const OK: i32 = 0;
/// A failure: a start-up error (config, key, provider, lock, an untrusted project for `--acp`)
/// reported on stderr; for `--stdio` the last turn ended `error`; for `-p` the turn ended
/// `error`, `truncated`, `refused`, `blocked` or `cancelled`; a subcommand that found a
/// problem (`mcp list`, `sandbox check`).
pub const FAILED: i32 = 1;
/// `--continue` found no session in the project, or `--resume`/`--fork` no session with that
/// id (or a prefix naming several).
pub const NO_SESSION: i32 = 2;
/// `-p`: a call needed a human's approval and none can be given (`ask` mode, or external code
/// no human approved), so it was declined.
pub const DECLINED: i32 = 3;
/// `-p`: the turn was stopped by a limit or a hook (`max_iterations`, `budget_exhausted`,
/// `unverified`).
pub const STOPPED: i32 = 4;
/// `-p --output-schema`: the answer was not valid against the schema, even after asking once
/// more.
pub const SCHEMA: i32 = 5;
/// The command line was wrong: an unknown flag or command, a missing or bad value, flags that
/// do not go together, an unreadable `--output-schema`, an empty or non-UTF-8 prompt on stdin
/// (sysexits' `EX_USAGE`).
pub const USAGE: i32 = 64;
/// `-p --mode` would loosen the project's mode in a run started by an agent (sysexits'
/// `EX_NOPERM`).
pub const NOPERM: i32 = 77;
/// A panic (a broken invariant): Rust's own exit code for it, not one openmax chooses, but one
/// a script sees.
pub const CRASH: i32 = 101;
/// A second SIGINT/SIGTERM (or SIGHUP in the terminal UI): exit at once.
pub const SECOND_SIGNAL: i32 = 130;

/// Every code with a one-line meaning, in order: what `--help` prints.
pub const TABLE: [(i32, &str); 10] = [
    (OK, "success"),
    (
        FAILED,
        "failure (start-up, a turn ended error, refused, cancelled, …)",
    ),
    (NO_SESSION, "no session to continue or resume"),
    (
        DECLINED,
        "-p: a call needed approval and no one could give it",
    ),
    (STOPPED, "-p: a limit or a hook stopped the turn"),
    (
        SCHEMA,
        "-p --output-schema: the answer is not valid against the schema",
    ),
    (USAGE, "bad command line"),
    (
        NOPERM,
        "-p --mode would loosen the mode in a run started by an agent",
    ),
    (
        CRASH,
        "a crash (a Rust panic; please report it with its stderr)",
    ),
    (SECOND_SIGNAL, "a second signal"),
];

/// The `--help` section listing [`TABLE`].
pub fn help_section() -> String {
    let mut s = String::from("Exit codes:\n");
    for (code, what) in TABLE {
        s.push_str(&format!("  {code:>3}  {what}\n"));
    }
    s.push_str("Details: the README's \"Exit codes\".");
    s
}

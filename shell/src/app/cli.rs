//! The command line (clap derive): the modes and options the README's "Use it" lists, and
//! the subcommands (`sessions`, `sessions repair`, `mcp list`, `sandbox check`), each with its
//! own `--help`.
//!
//! Invariants: exactly one action is chosen ([`Cli::action`]); the common options
//! (`--project`, `--provider`, `--model`, `--base-url`) apply to every action that needs them
//! and are ignored by the rest. A wrong command line exits [`crate::exit::USAGE`] (64), never
//! clap's own 2, which the contract gives to "no session to continue" ([`parse`]).

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use openmax_core::wire::Mode;

use crate::frontend::print_run::OutputFormat;

/// What `openmax --help` opens with.
const ABOUT: &str = "openmax: a coding agent in your terminal. It talks with a language model, \
runs the tools the model asks for (read, search, edit, shell) in a sandbox, asks you before \
risky actions, and keeps every session on disk.

  openmax                the interactive terminal UI (run `openmax --trust` once in a project)
  openmax -p PROMPT      one prompt, the reply on stdout: for scripts and CI (-p - reads stdin)
  openmax --stdio        the JSONL session protocol, for programs (openmax --spec stdio)
  openmax --acp          the Agent Client Protocol, for editors (Zed and others)
  openmax sessions       this project's sessions; openmax --resume ID opens one

`openmax --provider demo -p hi` shows a whole session with a scripted model, no key needed.";

/// openmax: a coding agent in your terminal.
#[derive(Debug, Clone, Parser)]
#[command(name = "openmax", version, about = ABOUT, long_about = None)]
pub struct Cli {
    /// Speak the JSONL session protocol on stdin/stdout (with --check: validate a stream).
    #[arg(long)]
    pub stdio: bool,

    /// Speak the Agent Client Protocol (ACP v1, JSON-RPC) on stdin/stdout, for editors.
    #[arg(long, conflicts_with_all = ["stdio", "prompt", "check", "spec", "approve", "trust", "continue_"])]
    pub acp: bool,

    /// Run one turn with PROMPT (`-` reads it from stdin): reply text on stdout, notices on
    /// stderr.
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT", conflicts_with_all = ["check", "spec", "approve", "trust"], help_heading = "One prompt (-p)")]
    pub prompt: Option<String>,

    /// With -p: `text` (the reply as it streams), `json` (one object at the end: reply,
    /// stop_reason, usage, cost, …) or `stream-json` (the --stdio event lines).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = OutputFormat::Text, requires = "prompt", help_heading = "One prompt (-p)")]
    pub output_format: OutputFormat,

    /// With -p: the mode of this run only (never saved): auto, ask or readonly. A run started
    /// by an agent may only choose the project's mode or a stricter one.
    #[arg(long, value_name = "MODE", value_parser = parse_mode, requires = "prompt", help_heading = "One prompt (-p)")]
    pub mode: Option<Mode>,

    /// With -p: the answer must be JSON valid against the JSON Schema in FILE; the model is
    /// told the schema and asked once more when its answer is not valid.
    #[arg(
        long,
        value_name = "FILE",
        requires = "prompt",
        help_heading = "One prompt (-p)"
    )]
    pub output_schema: Option<PathBuf>,
    /// With -p: attach the image FILE (PNG, JPEG, GIF or WebP; repeat for more).
    #[arg(long = "image", value_name = "FILE", requires = "prompt")]
    pub images: Vec<std::path::PathBuf>,

    /// Resume the project's latest session (with --stdio, -p, or the terminal UI).
    #[arg(long = "continue", conflicts_with_all = ["resume", "fork"])]
    pub continue_: bool,

    /// Resume the session with this id, or the one whose id starts with it (`openmax sessions`
    /// lists them).
    #[arg(long, value_name = "ID", conflicts_with_all = ["fork", "check", "spec", "approve", "trust", "acp"])]
    pub resume: Option<String>,

    /// Start a new session whose history is a copy of that session's (left unchanged).
    #[arg(long, value_name = "ID", conflicts_with_all = ["check", "spec", "approve", "trust", "acp"])]
    pub fork: Option<String>,

    /// Validate a JSONL event stream from stdin (use with --stdio).
    #[arg(long, requires = "stdio", conflicts_with_all = ["spec", "approve", "trust", "continue_"])]
    pub check: bool,

    /// Print the contract: `--spec stdio` as Markdown, with --json as a JSON Schema.
    #[arg(long, value_name = "WHAT", value_parser = ["stdio"], conflicts_with_all = ["stdio", "approve", "trust", "continue_"])]
    pub spec: Option<String>,

    /// With --spec: print the JSON Schema instead of Markdown.
    #[arg(long, requires = "spec")]
    pub json: bool,

    /// Record a human's approval of a project file's current bytes.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["stdio", "trust", "continue_"])]
    pub approve: Option<PathBuf>,

    /// Mark the project trusted.
    #[arg(long, conflicts_with_all = ["stdio", "continue_"])]
    pub trust: bool,

    /// The project directory (default: the nearest ancestor holding .git or .openmax).
    #[arg(long, value_name = "DIR", global = true)]
    pub project: Option<PathBuf>,

    /// The provider: anthropic, openai, openai-chat or demo (default: the config's, else
    /// the one whose key is set, ANTHROPIC_API_KEY before OPENAI_API_KEY).
    #[arg(long, value_name = "NAME", global = true)]
    pub provider: Option<String>,

    /// The model name.
    #[arg(long, value_name = "NAME", global = true)]
    pub model: Option<String>,

    /// The provider's base URL.
    #[arg(long = "base-url", value_name = "URL", global = true)]
    pub base_url: Option<String>,

    #[command(subcommand)]
    pub command: Option<Sub>,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    Mode::parse(s).ok_or_else(|| format!("expected one of {}", Mode::ALL.join(", ")))
}

/// The subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Sub {
    /// This project's sessions, the one used last first (live ones marked); `openmax --resume
    /// ID` opens one, `--fork ID` copies one.
    Sessions(SessionsArgs),
    /// The MCP servers this project's sessions start.
    #[command(subcommand_required = true, arg_required_else_help = true)]
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// The sandbox every process the agent starts runs in.
    #[command(subcommand_required = true, arg_required_else_help = true)]
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Put the project back as it was before the latest session's last turn that wrote
    /// (docs/checkpoints.md); running it again redoes.
    Undo(UndoArgs),
}

/// `openmax sessions [--json] [--all] [repair]`.
#[derive(Debug, Clone, Args)]
pub struct SessionsArgs {
    /// A JSON array of the sessions (id, project, started_ms, last_used_ms, turns,
    /// first_prompt, live) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Every project's sessions, not only this one's.
    #[arg(long)]
    pub all: bool,
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
}

/// `openmax sessions repair`.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionsCommand {
    /// Rebuild this project's session index from the session records (after `--continue` or
    /// `openmax sessions` reported it missing or corrupt).
    Repair,
}

/// `openmax mcp list`.
#[derive(Debug, Clone, Subcommand)]
pub enum McpCommand {
    /// Start the configured MCP servers as a session would, print each one's transport,
    /// state and tools, and stop them (exit 1 when one failed).
    List,
}

/// `openmax sandbox check`.
#[derive(Debug, Clone, Subcommand)]
pub enum SandboxCommand {
    /// Build this project's sandbox once, run nothing in it, and say which layers are in
    /// force here and why any is missing (exit 1 when one is not).
    Check,
}

/// The command line as clap reads it, with the exit codes in `--help`.
pub fn command() -> clap::Command {
    Cli::command().after_help(crate::exit::help_section())
}

/// Parse the process's arguments. On error the caller prints it and exits
/// [`crate::exit::USAGE`] (or 0 for `--help` and `--version`, whose "error" is the text).
pub fn parse() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os())
}

/// Parse `args` (the program name first).
pub fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command().try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

/// The exit code for a parse error: 0 for `--help` and `--version`, else
/// [`crate::exit::USAGE`].
pub fn error_code(e: &clap::Error) -> i32 {
    if e.use_stderr() {
        crate::exit::USAGE
    } else {
        crate::exit::OK
    }
}

/// Which session a session-running action opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// A new one.
    New,
    /// `--continue`: the latest used.
    Latest,
    /// `--resume ID`: by id or unique id prefix.
    Resume(String),
    /// `--fork ID`: a new one holding a copy of that one's history.
    Fork(String),
}

impl Pick {
    /// The session the start-up opens for this pick.
    pub(crate) fn resume(self) -> crate::start::Resume {
        use crate::start::Resume;
        match self {
            Pick::New => Resume::New,
            Pick::Latest => Resume::Latest,
            Pick::Resume(id) => Resume::Prefix(id),
            Pick::Fork(id) => Resume::Fork(id),
        }
    }
}

/// What one invocation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `--stdio [--continue | --resume ID | --fork ID]`
    Stdio { pick: Pick },
    /// `--acp`
    Acp,
    /// `-p PROMPT [--continue | --resume ID | --fork ID] [--output-format F] [--mode M]
    /// [--output-schema FILE]` (PROMPT `-`: read it from stdin)
    Print {
        prompt: String,
        pick: Pick,
        opts: PrintOptions,
    },
    /// `--check --stdio`
    Check,
    /// `--spec stdio [--json]`
    Spec { json: bool },
    /// `--approve PATH`
    Approve { path: PathBuf },
    /// `--trust`
    Trust,
    /// No mode flag: the interactive terminal UI (`openmax [--continue | --resume ID | --fork
    /// ID]`), which needs a terminal on stdin and stdout.
    Tui { pick: Pick },
    /// `mcp list`
    McpList,
    /// `sessions [--json] [--all]`
    Sessions { json: bool, all: bool },
    /// `sessions repair`
    SessionsRepair,
    /// `sandbox check`
    SandboxCheck,
    /// `undo [--turn N | --list | --gc] [--force]`
    Undo(UndoArgs),
}

/// `openmax undo [--turn N | --list | --gc] [--force]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Args)]
pub struct UndoArgs {
    /// Go back to the checkpoint before turn N of the latest session.
    #[arg(long, value_name = "N", conflicts_with_all = ["list", "gc"])]
    pub turn: Option<u64>,
    /// List the latest session's turns that wrote, with what they changed.
    #[arg(long, conflicts_with = "gc")]
    pub list: bool,
    /// Collect the checkpoints of deleted sessions and old ones now.
    #[arg(long)]
    pub gc: bool,
    /// Also restore files changed since the turn by someone else.
    #[arg(long, conflicts_with_all = ["list", "gc"])]
    pub force: bool,
}

/// How a `-p` run reports and in which mode it runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrintOptions {
    pub format: OutputFormat,
    /// `--mode`: this run's mode (never saved); `None`: the project's.
    pub mode: Option<Mode>,
    /// `--output-schema FILE`.
    pub schema: Option<PathBuf>,
}

impl Cli {
    /// What a session's start-up takes from these flags.
    pub fn flags(&self) -> crate::start::Flags {
        crate::start::Flags {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            project: self.project.clone(),
        }
    }

    /// The chosen action, or a usage message when none (or a meaningless mix) was given.
    pub fn action(&self) -> Result<Action, String> {
        // The common options (`--project`, …) go with a command; the modes do not.
        if self.command.is_some()
            && (self.stdio
                || self.acp
                || self.prompt.is_some()
                || self.check
                || self.spec.is_some()
                || self.approve.is_some()
                || self.trust
                || self.continue_
                || self.resume.is_some()
                || self.fork.is_some())
        {
            return Err(
                "a command (sessions, mcp, sandbox) goes with no mode flag; the common \
                        options (--project, --provider, --model, --base-url) are fine"
                    .into(),
            );
        }
        if self.check {
            return Ok(Action::Check);
        }
        // clap waives `requires` when the required flag conflicts with one given, so these
        // are checked here too.
        if self.json && self.spec.is_none() {
            return Err("--json goes with --spec stdio (or `openmax sessions --json`)".into());
        }
        if self.prompt.is_none()
            && (self.mode.is_some()
                || self.output_schema.is_some()
                || self.output_format != OutputFormat::Text)
        {
            return Err("--output-format, --mode and --output-schema go with -p".into());
        }
        if self.spec.is_some() {
            return Ok(Action::Spec { json: self.json });
        }
        if let Some(path) = &self.approve {
            return Ok(Action::Approve { path: path.clone() });
        }
        if self.trust {
            return Ok(Action::Trust);
        }
        if self.acp {
            return Ok(Action::Acp);
        }
        if let Some(sub) = &self.command {
            return sub.action();
        }
        let pick = match (&self.resume, &self.fork, self.continue_) {
            (Some(id), _, _) => Pick::Resume(id.clone()),
            (None, Some(id), _) => Pick::Fork(id.clone()),
            (None, None, true) => Pick::Latest,
            (None, None, false) => Pick::New,
        };
        match (&self.prompt, self.stdio) {
            (Some(_), true) => Err("choose one of --stdio and -p".into()),
            (Some(p), false) => Ok(Action::Print {
                prompt: p.clone(),
                pick,
                opts: PrintOptions {
                    format: self.output_format,
                    mode: self.mode,
                    schema: self.output_schema.clone(),
                },
            }),
            (None, true) => Ok(Action::Stdio { pick }),
            (None, false) => Ok(Action::Tui { pick }),
        }
    }
}

impl Sub {
    /// The action of a command (`openmax mcp list`, `sandbox check`, `undo`, `sessions`).
    fn action(&self) -> Result<Action, String> {
        Ok(match self {
            Sub::Mcp {
                command: McpCommand::List,
            } => Action::McpList,
            Sub::Sandbox {
                command: SandboxCommand::Check,
            } => Action::SandboxCheck,
            Sub::Undo(a) => Action::Undo(*a),
            Sub::Sessions(a) => match a.command {
                None => Action::Sessions {
                    json: a.json,
                    all: a.all,
                },
                Some(SessionsCommand::Repair) if a.json || a.all => {
                    return Err("--json and --all go with `openmax sessions`, not with \
                                `sessions repair`"
                        .into())
                }
                Some(SessionsCommand::Repair) => Action::SessionsRepair,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Action, String> {
        let mut v = vec!["openmax"];
        v.extend_from_slice(args);
        parse_from(v)
            .map_err(|e| e.to_string())
            .and_then(|c| c.action())
    }

    #[test]
    fn actions() {
        assert_eq!(parse(&["--stdio"]), Ok(Action::Stdio { pick: Pick::New }));
        assert_eq!(
            parse(&["--stdio", "--continue"]),
            Ok(Action::Stdio { pick: Pick::Latest })
        );
        assert_eq!(
            parse(&["-p", "hi", "--continue"]),
            Ok(Action::Print {
                prompt: "hi".into(),
                pick: Pick::Latest,
                opts: PrintOptions::default(),
            })
        );
        assert_eq!(
            parse(&[
                "-p",
                "-",
                "--output-format",
                "stream-json",
                "--mode",
                "readonly",
                "--output-schema",
                "s.json"
            ]),
            Ok(Action::Print {
                prompt: "-".into(),
                pick: Pick::New,
                opts: PrintOptions {
                    format: OutputFormat::StreamJson,
                    mode: Some(Mode::Readonly),
                    schema: Some("s.json".into()),
                },
            })
        );
        // The -p options need -p; a mode must be one of the three.
        assert!(parse(&["--stdio", "--mode", "auto"]).is_err());
        assert!(parse(&["--output-format", "json"]).is_err());
        assert!(parse(&["--output-schema", "s.json"]).is_err());
        assert!(parse(&["--trust", "--mode", "auto"]).is_err());
        assert!(parse(&["-p", "x", "--mode", "yolo"]).is_err());
        assert!(parse(&["-p", "x", "--output-format", "xml"]).is_err());
        assert_eq!(
            parse(&["--stdio", "--resume", "ab12"]),
            Ok(Action::Stdio {
                pick: Pick::Resume("ab12".into())
            })
        );
        assert_eq!(
            parse(&["--fork", "ab12"]),
            Ok(Action::Tui {
                pick: Pick::Fork("ab12".into())
            })
        );
        assert!(parse(&["--continue", "--resume", "x"]).is_err());
        assert!(parse(&["--resume", "x", "--fork", "y"]).is_err());
        assert_eq!(
            parse(&["sessions", "--json", "--all"]),
            Ok(Action::Sessions {
                json: true,
                all: true
            })
        );
        assert_eq!(parse(&["sessions", "repair"]), Ok(Action::SessionsRepair));
        assert!(parse(&["--stdio", "--json"]).is_err());
        assert!(parse(&["--all"]).is_err());
        assert!(parse(&["sessions", "repair", "--json"]).is_err());
        assert!(parse(&["sessions", "--all", "repair"]).is_err());
        assert_eq!(
            parse(&["sessions", "--project", "/x", "repair"]),
            Ok(Action::SessionsRepair)
        );
        assert!(parse(&["--stdio", "sessions"]).is_err());
        assert!(parse(&["-p", "x", "sessions"]).is_err());
        assert!(parse(&["sessions", "--continue"]).is_err());
        assert!(parse(&["mcp"]).is_err());
        assert!(parse(&["mcp", "lists"]).is_err());
        assert_eq!(parse(&["mcp", "list"]), Ok(Action::McpList));
        assert!(parse(&["--check", "--stdio", "sessions"]).is_err());
        assert!(parse(&["--trust", "sandbox", "check"]).is_err());
        assert_eq!(
            parse(&["--project", "/x", "sandbox", "check"]),
            Ok(Action::SandboxCheck)
        );
        assert_eq!(
            parse(&["sessions", "--project", "/x"]),
            Ok(Action::Sessions {
                json: false,
                all: false
            })
        );
        assert_eq!(parse(&["--check", "--stdio"]), Ok(Action::Check));
        assert_eq!(
            parse(&["--spec", "stdio", "--json"]),
            Ok(Action::Spec { json: true })
        );
        assert_eq!(parse(&["--trust"]), Ok(Action::Trust));
        assert_eq!(parse(&["--acp"]), Ok(Action::Acp));
        assert!(parse(&["--acp", "--stdio"]).is_err());
        assert_eq!(
            parse(&["--approve", "a.json"]),
            Ok(Action::Approve {
                path: "a.json".into()
            })
        );
        assert_eq!(parse(&["sandbox", "check"]), Ok(Action::SandboxCheck));
        assert_eq!(parse(&["undo"]), Ok(Action::Undo(UndoArgs::default())));
        assert_eq!(
            parse(&["undo", "--turn", "2", "--force"]),
            Ok(Action::Undo(UndoArgs {
                turn: Some(2),
                force: true,
                ..UndoArgs::default()
            }))
        );
        assert!(parse(&["undo", "--list", "--gc"]).is_err());
        assert!(parse(&["undo", "--turn", "x"]).is_err());
        assert!(parse(&["--list"]).is_err());
        assert!(parse(&["sandbox", "check", "--force"]).is_err());
        assert!(parse(&["sandbox"]).is_err());
        assert_eq!(parse(&[]), Ok(Action::Tui { pick: Pick::New }));
        assert_eq!(
            parse(&["--continue"]),
            Ok(Action::Tui { pick: Pick::Latest })
        );
        assert!(parse(&["--check"]).is_err());
        assert!(parse(&["--spec", "other"]).is_err());
        assert!(parse(&["--stdio", "-p", "x"]).is_err());
    }

    #[test]
    fn a_bad_command_line_is_a_usage_error_and_help_is_not() {
        let e = parse_from(["openmax", "--no-such-flag"]).unwrap_err();
        assert_eq!(error_code(&e), 64);
        let e = parse_from(["openmax", "--help"]).unwrap_err();
        assert_eq!(error_code(&e), 0);
        let help = e.to_string();
        assert!(
            help.starts_with("openmax: a coding agent in your terminal"),
            "{help}"
        );
        assert!(help.contains("Exit codes:"), "{help}");
        let e = parse_from(["openmax", "--version"]).unwrap_err();
        assert_eq!(error_code(&e), 0);
    }

    #[test]
    fn each_subcommand_has_its_own_help() {
        let top = parse_from(["openmax", "--help"]).unwrap_err().to_string();
        for (args, says) in [
            (vec!["sessions"], "the one used last first"),
            (
                vec!["sessions", "repair"],
                "Rebuild this project's session index",
            ),
            (vec!["mcp"], "The MCP servers"),
            (vec!["mcp", "list"], "Start the configured MCP servers"),
            (vec!["sandbox"], "The sandbox every process"),
            (
                vec!["sandbox", "check"],
                "Build this project's sandbox once",
            ),
        ] {
            let mut argv = vec!["openmax"];
            argv.extend(&args);
            argv.push("--help");
            let help = parse_from(argv).unwrap_err().to_string();
            assert_ne!(help, top, "{args:?}");
            assert!(help.contains(says), "{args:?}: {help}");
            assert!(
                help.contains(&format!("Usage: openmax {}", args.join(" "))),
                "{args:?}: {help}"
            );
        }
    }

    #[test]
    fn common_options() {
        let c = parse_from([
            "openmax",
            "--stdio",
            "--project",
            "/x",
            "--provider",
            "demo",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:1",
        ])
        .unwrap();
        assert_eq!(c.provider.as_deref(), Some("demo"));
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:1"));
    }
}

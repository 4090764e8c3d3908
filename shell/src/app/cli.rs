//! The command line (clap derive): the modes and options the README's "Use it" lists.
//!
//! Invariant: exactly one action is chosen ([`Cli::action`]); the common options
//! (`--project`, `--provider`, `--model`, `--base-url`) apply to every action that needs them
//! and are ignored by the rest.

use std::path::PathBuf;

use clap::Parser;

/// openmax: a coding-agent harness speaking `openmax-stdio/6`.
#[derive(Debug, Clone, Parser)]
#[command(name = "openmax", version, about, long_about = None)]
pub struct Cli {
    /// Speak the JSONL session protocol on stdin/stdout (with --check: validate a stream).
    #[arg(long)]
    pub stdio: bool,

    /// Speak the Agent Client Protocol (ACP v1, JSON-RPC) on stdin/stdout, for editors.
    #[arg(long, conflicts_with_all = ["stdio", "prompt", "check", "spec", "approve", "trust", "continue_", "command"])]
    pub acp: bool,

    /// Run one turn with PROMPT: reply text on stdout, notices on stderr.
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT", conflicts_with_all = ["check", "spec", "approve", "trust"])]
    pub prompt: Option<String>,

    /// Resume the project's latest session (with --stdio, -p, or the terminal UI).
    #[arg(long = "continue")]
    pub continue_: bool,

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

    /// The provider: anthropic, openai, openai-chat or demo.
    #[arg(long, value_name = "NAME", global = true)]
    pub provider: Option<String>,

    /// The model name.
    #[arg(long, value_name = "NAME", global = true)]
    pub model: Option<String>,

    /// The provider's base URL.
    #[arg(long = "base-url", value_name = "URL", global = true)]
    pub base_url: Option<String>,

    /// With `undo`: go back to the checkpoint before turn N of the latest session.
    #[arg(long, value_name = "N", requires = "command", conflicts_with_all = ["list", "gc"])]
    pub turn: Option<u64>,

    /// With `undo`: list the latest session's turns that wrote, with what they changed.
    #[arg(long, requires = "command", conflicts_with = "gc")]
    pub list: bool,

    /// With `undo`: collect the checkpoints of deleted sessions and old ones now.
    #[arg(long, requires = "command")]
    pub gc: bool,

    /// With `undo`: also restore files changed since the turn by someone else.
    #[arg(long, requires = "command", conflicts_with_all = ["list", "gc"])]
    pub force: bool,

    /// A subcommand: `mcp list` (the configured MCP servers, their state and tools), `sandbox
    /// check` (which layers of the sandbox are in force on this machine, and why any is
    /// missing), `undo` (the project as it was before the latest session's last turn; with
    /// `--turn N`, `--list`, `--gc`, `--force`).
    #[arg(value_name = "COMMAND", conflicts_with_all = ["stdio", "prompt", "check", "spec", "approve", "trust"])]
    pub command: Vec<String>,
}

/// What one invocation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `--stdio [--continue]`
    Stdio { resume: bool },
    /// `--acp`
    Acp,
    /// `-p PROMPT [--continue]`
    Print { prompt: String, resume: bool },
    /// `--check --stdio`
    Check,
    /// `--spec stdio [--json]`
    Spec { json: bool },
    /// `--approve PATH`
    Approve { path: PathBuf },
    /// `--trust`
    Trust,
    /// No mode flag: the interactive terminal UI (`openmax [--continue]`), which needs a
    /// terminal on stdin and stdout.
    Tui { resume: bool },
    /// `mcp list`
    McpList,
    /// `sandbox check`
    SandboxCheck,
    /// `undo [--turn N | --list | --gc] [--force]`
    Undo(UndoArgs),
}

/// What `openmax undo` was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UndoArgs {
    pub turn: Option<u64>,
    pub list: bool,
    pub gc: bool,
    pub force: bool,
}

impl Cli {
    /// The chosen action, or a usage message when none (or a meaningless mix) was given.
    pub fn action(&self) -> Result<Action, String> {
        if self.check {
            return Ok(Action::Check);
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
        let undo = UndoArgs {
            turn: self.turn,
            list: self.list,
            gc: self.gc,
            force: self.force,
        };
        match self.command.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            [] => {}
            ["undo"] => return Ok(Action::Undo(undo)),
            _ if undo != UndoArgs::default() => {
                return Err("--turn, --list, --gc and --force go with `openmax undo`".into())
            }
            ["mcp", "list"] => return Ok(Action::McpList),
            ["sandbox", "check"] => return Ok(Action::SandboxCheck),
            _ => {
                return Err(format!(
                    "unknown command {:?}: the commands are `openmax mcp list`, \
                     `openmax sandbox check` and `openmax undo`",
                    self.command.join(" ")
                ))
            }
        }
        match (&self.prompt, self.stdio) {
            (Some(_), true) => Err("choose one of --stdio and -p".into()),
            (Some(p), false) => Ok(Action::Print {
                prompt: p.clone(),
                resume: self.continue_,
            }),
            (None, true) => Ok(Action::Stdio {
                resume: self.continue_,
            }),
            (None, false) => Ok(Action::Tui {
                resume: self.continue_,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Action, String> {
        let mut v = vec!["openmax"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v)
            .map_err(|e| e.to_string())
            .and_then(|c| c.action())
    }

    #[test]
    fn actions() {
        assert_eq!(parse(&["--stdio"]), Ok(Action::Stdio { resume: false }));
        assert_eq!(
            parse(&["--stdio", "--continue"]),
            Ok(Action::Stdio { resume: true })
        );
        assert_eq!(
            parse(&["-p", "hi", "--continue"]),
            Ok(Action::Print {
                prompt: "hi".into(),
                resume: true
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
        assert_eq!(parse(&[]), Ok(Action::Tui { resume: false }));
        assert_eq!(parse(&["--continue"]), Ok(Action::Tui { resume: true }));
        assert!(parse(&["--check"]).is_err());
        assert!(parse(&["--spec", "other"]).is_err());
        assert!(parse(&["--stdio", "-p", "x"]).is_err());
    }

    #[test]
    fn common_options() {
        let c = Cli::try_parse_from([
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

//! The slash commands: one table of names, arguments and one-line help ([`COMMANDS`]; the `/`
//! menu and `/help` read it), the menu the editor opens while a `/word` is typed, and what each
//! command does to the view: a wire command queued ([`View::take_commands`]) or a request for
//! the UI loop ([`View::take_requests`]), which carries out what the wire has no command for.
//! Nothing here decides policy.
//!
//! The menu: typing `/` lists the commands whose name starts with what follows it; Up and Down
//! move its highlight, Tab completes the highlighted name, Enter runs the command typed or, when
//! the typed word names none, the highlighted one (a command that takes an argument is completed
//! instead, for the argument to be typed).

use openmax_core::wire::{Command, Mode};

use super::blocks::Level;
use super::view::{Next, Request, View};

/// One slash command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlashCommand {
    pub name: &'static str,
    /// Its argument as shown in the menu (empty for none).
    pub args: &'static str,
    pub help: &'static str,
}

/// Every slash command, in the menu's order.
pub const COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        name: "help",
        args: "",
        help: "the keys and commands",
    },
    SlashCommand {
        name: "model",
        args: "<name>",
        help: "switch the model for the next turns (no name: show it)",
    },
    SlashCommand {
        name: "mode",
        args: "<auto|ask|readonly>",
        help: "change the approval mode (no mode: show it)",
    },
    SlashCommand {
        name: "new",
        args: "",
        help: "start a fresh session",
    },
    SlashCommand {
        name: "resume",
        args: "",
        help: "pick a session of this project to continue",
    },
    SlashCommand {
        name: "undo",
        args: "[N|list] [--force]",
        help: "put the project back as it was before the last turn that wrote (or turn N)",
    },
    SlashCommand {
        name: "compact",
        args: "",
        help: "compact the conversation now",
    },
    SlashCommand {
        name: "status",
        args: "",
        help: "model, mode, sandbox, session and tokens",
    },
    SlashCommand {
        name: "cost",
        args: "",
        help: "this session's tokens and what they cost",
    },
    SlashCommand {
        name: "reload",
        args: "",
        help: "re-read tools, skills, prompt, hooks and MCP servers",
    },
    SlashCommand {
        name: "trust",
        args: "",
        help: "trust this folder (as openmax --trust)",
    },
    SlashCommand {
        name: "approve",
        args: "<file>",
        help: "approve a project file's current bytes (as openmax --approve)",
    },
    SlashCommand {
        name: "quit",
        args: "",
        help: "leave (the session is kept)",
    },
];

/// The commands the menu offers for the editor's `text`: while it is `/` and at most one
/// word, those whose name starts with that word; otherwise none (the menu is closed).
pub fn menu(text: &str) -> Vec<&'static SlashCommand> {
    let Some(word) = text.strip_prefix('/') else {
        return Vec::new();
    };
    if word.chars().any(char::is_whitespace) {
        return Vec::new();
    }
    COMMANDS
        .iter()
        .filter(|c| c.name.starts_with(word))
        .collect()
}

/// The `/help` text: the keys, then every command with its help.
pub fn help() -> String {
    let mut s = String::from(
        "keys: Enter send · Ctrl-J or Alt-Enter newline · Up/Down history · y/n answer a \
         question or an approval · Esc cancel the turn · Ctrl-C cancel, twice on an idle \
         prompt quit · Ctrl-D quit on an empty prompt · Shift-Tab cycle the mode auto → ask → \
         readonly · Ctrl-U clear\ncommands:",
    );
    for c in COMMANDS {
        let args = if c.args.is_empty() {
            String::new()
        } else {
            format!(" {}", c.args)
        };
        s.push_str(&format!("\n  /{}{args}  {}", c.name, c.help));
    }
    s.push_str(
        "\n  /mcp__<server>__<prompt> [arg=value…]  an MCP server's prompt\n\
         in a prompt: @path/to/image.png attaches an image (paste or drop its path) · \
         @server:uri the text of an MCP resource",
    );
    s
}

impl View {
    /// The menu's entries for the text being typed.
    pub fn menu(&self) -> Vec<&'static SlashCommand> {
        menu(self.editor.text())
    }

    /// Up (`-1`) or Down (`1`) in the open menu.
    pub(super) fn menu_move(&mut self, by: isize) {
        let n = self.menu().len();
        if n > 0 {
            self.menu_at =
                (self.menu_at.min(n - 1) as isize + by).clamp(0, n as isize - 1) as usize;
        }
    }

    /// Tab: the highlighted command's name in the editor (with a space when it takes an
    /// argument).
    pub(super) fn menu_complete(&mut self) {
        let items = self.menu();
        if let Some(c) = items.get(self.menu_at.min(items.len().saturating_sub(1))) {
            let text = if c.args.is_empty() {
                format!("/{}", c.name)
            } else {
                format!("/{} ", c.name)
            };
            self.editor.clear();
            self.editor.insert(&text);
            self.menu_at = 0;
        }
    }

    /// Enter on `/word`: the command named, else the highlighted one (completed instead when it
    /// takes an argument). `false` when the menu had nothing to offer.
    pub(super) fn menu_enter(&mut self) -> bool {
        let text = self.editor.text();
        let word = text.trim().trim_start_matches('/');
        if COMMANDS.iter().any(|c| c.name == word) {
            return false;
        }
        let items = self.menu();
        let Some(c) = items.get(self.menu_at.min(items.len().saturating_sub(1))) else {
            return false;
        };
        if c.args.is_empty() {
            self.editor.clear();
            self.editor.insert(&format!("/{}", c.name));
            false
        } else {
            self.menu_complete();
            true
        }
    }

    /// Run `/cmd` (without its slash).
    pub(super) fn slash(&mut self, cmd: &str) {
        self.menu_at = 0;
        let mut words = cmd.split_whitespace();
        let name = words.next().unwrap_or("");
        let rest: Vec<&str> = words.collect();
        let busy = self.running.is_some();
        match (name, rest.as_slice()) {
            ("resume" | "new" | "compact" | "model" | "trust" | "approve", _)
                if busy && !(name == "model" && rest.is_empty()) =>
            {
                self.hint = Some(format!("a turn is running: Esc cancels it, then /{name}"));
            }
            ("resume", []) => self.wants_sessions = true,
            ("new", []) => {
                self.notice(Level::Info, "starting a fresh session…");
                self.next = Some(Next::New);
                self.quit();
            }
            ("mode", [mode]) => self.send(Command::ApprovalMode {
                mode: mode.to_string(),
            }),
            ("mode", []) => {
                let now = self.status.mode.map(Mode::as_str).unwrap_or("unknown");
                self.notice(
                    Level::Info,
                    &format!("mode: {now} (change it with /mode <auto|ask|readonly> or Shift-Tab)"),
                );
            }
            ("model", [model]) => self.requests.push(Request::Model(model.to_string())),
            ("model", []) => {
                let m = self.status.model.clone();
                self.notice(
                    Level::Info,
                    &format!("model: {m} (switch it with /model <name>)"),
                );
            }
            ("compact", []) => self.requests.push(Request::Compact),
            ("status", []) => self.requests.push(Request::Status),
            ("cost", []) => self.requests.push(Request::Cost),
            ("trust", []) => self.requests.push(Request::Trust),
            ("approve", [file]) => self.requests.push(Request::Approve(file.to_string())),
            ("approve", []) => self.notice(
                Level::Error,
                "/approve needs the project file to approve: /approve <file>",
            ),
            ("undo", _) => self.slash_undo(cmd),
            ("reload", []) => self.send(Command::Reload),
            ("help", []) => self.notice(Level::Info, &help()),
            ("quit", []) => self.quit(),
            _ => {
                let known = COMMANDS.iter().find(|c| c.name == name);
                let msg = match known {
                    Some(c) if c.args.is_empty() => format!("/{name} takes no argument"),
                    Some(c) => format!("usage: /{} {}", c.name, c.args),
                    None => format!("unknown command /{name}: type / for the list, /help for keys"),
                };
                self.notice(Level::Error, &msg);
            }
        }
    }
}

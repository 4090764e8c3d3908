//! The programs that run their operands as a command, and their options as their own parsers
//! read them (GNU coreutils, findutils, util-linux, sudo, doas): which short options take a
//! value (attached, `-uNAME`, or the next word), which take one only attached (`xargs -i{}`),
//! and every long option with how it takes a value, so an unambiguous abbreviation
//! (`--uns NAME`, as getopt_long accepts) is read like the full name.
//!
//! Invariant: the tables list every option the tool documents; an option missing here would let
//! its value be taken for the command.

/// How a long option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// None.
    No,
    /// Always: `--opt=v` or `--opt v`.
    Required,
    /// Only attached: `--opt=v`.
    Optional,
}

/// One wrapper's options.
#[derive(Debug)]
pub struct Opts {
    /// Short options taking a value, attached or the next word.
    pub short_value: &'static str,
    /// Short options taking a value only when attached (`-l1`).
    pub short_optional: &'static str,
    /// Every long option.
    pub long: &'static [(&'static str, Arg)],
    /// Whether a word among the options holding a `=` (and not starting with `/`) sets a
    /// variable for the command rather than being the command: sudo's `VAR=value`.
    pub assignments: bool,
}

use Arg::{No, Optional, Required};

const NONE: Opts = Opts {
    short_value: "",
    short_optional: "",
    assignments: false,
    long: &[("help", No), ("version", No)],
};

/// No options at all (`command`, `builtin`, `busybox`, a reserved word read as a command name).
const BARE: Opts = Opts {
    short_value: "",
    short_optional: "",
    assignments: false,
    long: &[],
};

/// `env`'s options (its `-S` and `NAME=VALUE` operands are read by the caller).
pub const ENV: Opts = Opts {
    short_value: "uCSa",
    short_optional: "",
    assignments: false,
    long: &[
        ("ignore-environment", No),
        ("null", No),
        ("unset", Required),
        ("chdir", Required),
        ("split-string", Required),
        ("argv0", Required),
        ("block-signal", Optional),
        ("default-signal", Optional),
        ("ignore-signal", Optional),
        ("list-signal-handling", No),
        ("debug", No),
        ("help", No),
        ("version", No),
    ],
};

/// The options of a wrapper other than `env`; `None` for a program that is not one.
pub fn options(program: &str) -> Option<&'static Opts> {
    Some(match program {
        "command" | "builtin" | "busybox" => &BARE,
        // A reserved word the grammar took for a command name (`! if …`, `time { …; }`), or
        // one bash runs as a program where it reads no reserved word (after an assignment or
        // a redirection: `a=1 ! x` runs a program `!`, which no system has): what follows it
        // is read as a command too, the stricter reading.
        "!" | "{" | "}" | "if" | "then" | "else" | "elif" | "fi" | "do" | "done" | "while"
        | "until" | "esac" | "coproc" => &BARE,
        "nohup" => &NONE,
        "setsid" => &Opts {
            short_value: "",
            short_optional: "",
            assignments: false,
            long: &[
                ("ctty", No),
                ("fork", No),
                ("wait", No),
                ("help", No),
                ("version", No),
            ],
        },
        "exec" => &Opts {
            short_value: "a",
            short_optional: "",
            assignments: false,
            long: &[],
        },
        "nice" => &Opts {
            short_value: "n",
            short_optional: "",
            assignments: false,
            long: &[("adjustment", Required), ("help", No), ("version", No)],
        },
        "timeout" => &Opts {
            short_value: "ks",
            short_optional: "",
            assignments: false,
            long: &[
                ("foreground", No),
                ("kill-after", Required),
                ("preserve-status", No),
                ("signal", Required),
                ("verbose", No),
                ("help", No),
                ("version", No),
            ],
        },
        "time" => &Opts {
            short_value: "fo",
            short_optional: "",
            assignments: false,
            long: &[
                ("append", No),
                ("format", Required),
                ("output", Required),
                ("portability", No),
                ("quiet", No),
                ("verbose", No),
                ("help", No),
                ("version", No),
            ],
        },
        "sudo" => &Opts {
            short_value: "aCcDgpRrTtUu",
            short_optional: "h",
            assignments: true,
            long: &[
                ("askpass", No),
                ("auth-type", Required),
                ("background", No),
                ("bell", No),
                ("close-from", Required),
                ("chdir", Required),
                ("chroot", Required),
                ("command-timeout", Required),
                ("edit", No),
                ("group", Required),
                ("help", No),
                ("host", Required),
                ("list", No),
                ("login", No),
                ("login-class", Required),
                ("no-update", No),
                ("non-interactive", No),
                ("other-user", Required),
                ("preserve-env", Optional),
                ("preserve-groups", No),
                ("prompt", Required),
                ("remove-timestamp", No),
                ("reset-timestamp", No),
                ("role", Required),
                ("set-home", No),
                ("shell", No),
                ("stdin", No),
                ("type", Required),
                ("user", Required),
                ("validate", No),
                ("version", No),
            ],
        },
        "doas" => &Opts {
            short_value: "aCu",
            short_optional: "",
            assignments: false,
            long: &[],
        },
        "stdbuf" => &Opts {
            short_value: "ioe",
            short_optional: "",
            assignments: false,
            long: &[
                ("input", Required),
                ("output", Required),
                ("error", Required),
                ("help", No),
                ("version", No),
            ],
        },
        "ionice" => &Opts {
            short_value: "cnpPu",
            short_optional: "",
            assignments: false,
            long: &[
                ("class", Required),
                ("classdata", Required),
                ("pid", Required),
                ("pgid", Required),
                ("uid", Required),
                ("ignore", No),
                ("help", No),
                ("version", No),
            ],
        },
        "xargs" => &Opts {
            short_value: "adEILnPs",
            short_optional: "eil",
            assignments: false,
            long: &[
                ("null", No),
                ("arg-file", Required),
                ("delimiter", Required),
                ("eof", Optional),
                ("replace", Optional),
                ("max-lines", Optional),
                ("max-args", Required),
                ("open-tty", No),
                ("max-procs", Required),
                ("interactive", No),
                ("no-run-if-empty", No),
                ("max-chars", Required),
                ("show-limits", No),
                ("verbose", No),
                ("exit", No),
                ("process-slot-var", Required),
                ("help", No),
                ("version", No),
            ],
        },
        _ => return None,
    })
}

/// The long option `name` (written after `--`, without `=value`) resolves to: the exact name,
/// or the only one it abbreviates (as getopt_long reads it: the empty name of `--=x` too).
pub fn long(opts: &Opts, name: &str) -> Option<(&'static str, Arg)> {
    if let Some(&exact) = opts.long.iter().find(|(n, _)| *n == name) {
        return Some(exact);
    }
    let mut found = opts.long.iter().filter(|(n, _)| n.starts_with(name));
    match (found.next(), found.next()) {
        (Some(&only), None) => Some(only),
        _ => None,
    }
}

/// How one word among a wrapper's options is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not an option: the operands start here.
    Operand,
    /// `--`: the operands start after it.
    EndOfOptions,
    /// An option; `takes_next` when its value is the next word. `value`: its value when given
    /// in this word (`-uNAME`, `--unset=NAME`) with the option letter or name.
    Option {
        /// The value is the next word.
        takes_next: bool,
        /// The option (letter or full long name) and the value given in this word.
        value: Option<(String, String)>,
    },
}

/// Read one word `w` among the options of `opts`.
pub fn step(opts: &Opts, w: &str) -> Step {
    if w == "--" {
        return Step::EndOfOptions;
    }
    if let Some(rest) = w.strip_prefix("--") {
        let (name, value) = match rest.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (rest, None),
        };
        return match long(opts, name) {
            Some((full, Arg::Required)) => Step::Option {
                takes_next: value.is_none(),
                value: value.map(|v| (full.to_string(), v.to_string())),
            },
            Some((full, _)) => Step::Option {
                takes_next: false,
                value: value.map(|v| (full.to_string(), v.to_string())),
            },
            None => Step::Option {
                takes_next: false,
                value: None,
            },
        };
    }
    if w.len() > 1 && w.starts_with('-') {
        let cluster = &w[1..];
        for (k, c) in cluster.char_indices() {
            let rest = &cluster[k + c.len_utf8()..];
            if opts.short_value.contains(c) {
                return Step::Option {
                    takes_next: rest.is_empty(),
                    value: (!rest.is_empty()).then(|| (c.to_string(), rest.to_string())),
                };
            }
            if opts.short_optional.contains(c) {
                return Step::Option {
                    takes_next: false,
                    value: (!rest.is_empty()).then(|| (c.to_string(), rest.to_string())),
                };
            }
        }
        return Step::Option {
            takes_next: false,
            value: None,
        };
    }
    Step::Operand
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attached_separate_and_abbreviated() {
        let x = options("xargs").unwrap();
        assert_eq!(
            step(x, "-n1"),
            Step::Option {
                takes_next: false,
                value: Some(("n".into(), "1".into()))
            }
        );
        assert!(matches!(
            step(x, "-n"),
            Step::Option {
                takes_next: true,
                ..
            }
        ));
        assert!(matches!(
            step(x, "-0n"),
            Step::Option {
                takes_next: true,
                ..
            }
        ));
        assert!(matches!(
            step(x, "-iP"),
            Step::Option {
                takes_next: false,
                ..
            }
        ));
        assert!(matches!(
            step(x, "-i"),
            Step::Option {
                takes_next: false,
                ..
            }
        ));
        assert!(matches!(
            step(x, "--max-a"),
            Step::Option {
                takes_next: true,
                ..
            }
        ));
        assert!(
            matches!(
                step(x, "--max"),
                Step::Option {
                    takes_next: false,
                    ..
                }
            ),
            "ambiguous"
        );
        assert!(matches!(
            step(x, "--replace"),
            Step::Option {
                takes_next: false,
                ..
            }
        ));
        assert_eq!(step(x, "--"), Step::EndOfOptions);
        assert_eq!(step(x, "rm"), Step::Operand);
        assert_eq!(long(&ENV, "uns"), Some(("unset", Arg::Required)));
        assert_eq!(long(&ENV, "s"), Some(("split-string", Arg::Required)));
        assert_eq!(long(&ENV, "d"), None, "debug or default-signal");
        // The empty name of `--=x` abbreviates every long option, as getopt_long reads it: the
        // only one there is, or none where there are several (`env --=x` and `nice --=x` say
        // "ambiguous").
        let one = Opts {
            short_value: "",
            short_optional: "",
            assignments: false,
            long: &[("only", Arg::Required)],
        };
        assert_eq!(long(&one, "on"), Some(("only", Arg::Required)));
        assert_eq!(long(&one, ""), Some(("only", Arg::Required)));
        assert_eq!(long(&ENV, ""), None);
        for program in [
            "nice", "timeout", "xargs", "setsid", "stdbuf", "sudo", "time",
        ] {
            assert_eq!(long(options(program).unwrap(), ""), None, "{program}");
        }
    }
}

//! From a command line to the programs it runs: wrappers stripped, program paths normalised,
//! nested shells parsed, and what cannot be judged statically named.
//!
//! Invariants:
//! - Wrappers that run their operands as a command — `env` (its options, `NAME=VALUE`
//!   operands and `-S` split strings), `command`, `builtin`, `exec`, `nice`, `nohup`,
//!   `setsid`, `timeout` (options and duration), `time`, `sudo`, `doas`, `stdbuf`, `ionice`,
//!   `xargs`, `busybox` — are stripped with their own options, repeatedly. Each level is
//!   reported, so a rule naming the wrapper still matches.
//! - `find … -exec|-execdir|-ok|-okdir CMD … ;|+` reports `CMD …` as well.
//! - A shell (`sh`, `bash`, `dash`, `zsh`, `ksh`, `mksh`, `ash`, `yash`, `posh`) with `-c`
//!   and a literal script has that script parsed the same way, up to [`MAX_DEPTH`] levels.
//! - The program is its path's last component: `/bin/rm` and `./rm` are `rm`.
//! - Unjudgeable, with a reason in [`Analysis::unjudgeable`]: a command name computed at run
//!   time (a variable, a substitution, a glob), `eval`, `source`/`.`, a shell reading its
//!   commands from stdin (`… | sh`) or from a script file, a shell whose `-c` script is computed,
//!   nesting deeper than [`MAX_DEPTH`], and a line that does not parse. The commands that were
//!   recognised are still reported (a static `eval` string is also parsed).

use super::bash::{self, Word};

/// How many nested `sh -c` / `eval` levels are parsed.
pub const MAX_DEPTH: usize = 8;

/// One program run with its arguments (values after quote removal; a run-time value is its
/// source text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The program's name (its path's last component).
    pub program: String,
    /// The arguments.
    pub args: Vec<String>,
}

impl Command {
    /// The program and arguments joined by single spaces.
    pub fn text(&self) -> String {
        let mut s = self.program.clone();
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

/// What a command line runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// Every program run, wrappers included, in source order.
    pub commands: Vec<Command>,
    /// Why some of it cannot be judged statically (empty when all of it can).
    pub unjudgeable: Vec<String>,
}

/// Analyse one command line.
pub fn analyse(line: &str) -> Analysis {
    let mut out = Analysis::default();
    script(line, 0, &mut out);
    out
}

fn script(src: &str, depth: usize, out: &mut Analysis) {
    if depth > MAX_DEPTH {
        out.unjudgeable
            .push(format!("shells nested deeper than {MAX_DEPTH} levels"));
        return;
    }
    let parsed = bash::parse(src);
    if parsed.broken {
        out.unjudgeable
            .push("the command line does not parse as bash".to_string());
    }
    for words in parsed.commands {
        simple(words, depth, out);
    }
}

/// Options of a wrapper: short options that take a value, long options that take one.
struct Opts {
    short_value: &'static str,
    long_value: &'static [&'static str],
}

const NO_OPTS: Opts = Opts {
    short_value: "",
    long_value: &[],
};

fn wrapper_opts(program: &str) -> Option<Opts> {
    let o = |short_value, long_value| {
        Some(Opts {
            short_value,
            long_value,
        })
    };
    match program {
        "command" | "builtin" | "nohup" | "setsid" | "busybox" => Some(NO_OPTS),
        "exec" => o("a", &[]),
        "nice" => o("n", &["adjustment"]),
        "timeout" => o("sk", &["signal", "kill-after"]),
        "time" => o("fo", &["format", "output"]),
        "sudo" => o(
            "ugCDhpRrTtU",
            &[
                "user",
                "group",
                "chdir",
                "host",
                "prompt",
                "role",
                "type",
                "other-user",
                "close-from",
                "chroot",
                "command-timeout",
            ],
        ),
        "doas" => o("uC", &[]),
        "stdbuf" => o("ioe", &["input", "output", "error"]),
        "ionice" => o("cnp", &["class", "classdata", "pid"]),
        "xargs" => o(
            "adEILnPs",
            &[
                "arg-file",
                "delimiter",
                "max-args",
                "max-procs",
                "max-chars",
                "process-slot-var",
            ],
        ),
        _ => None,
    }
}

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh",
];

/// The last component of a program path.
fn program_name(word: &str) -> String {
    match word.rsplit('/').next() {
        Some(last) if !last.is_empty() => last.to_string(),
        _ => word.to_string(),
    }
}

/// Skip a wrapper's options; the index of its first operand.
fn skip_options(words: &[Word], opts: &Opts) -> usize {
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w.dynamic {
            return i;
        }
        let t = w.text.as_str();
        if t == "--" {
            return i + 1;
        }
        if let Some(long) = t.strip_prefix("--") {
            let takes = !long.contains('=') && opts.long_value.contains(&long);
            i += if takes { 2 } else { 1 };
        } else if t.len() > 1 && t.starts_with('-') {
            let cluster = &t[1..];
            let mut step = 1;
            for (k, c) in cluster.char_indices() {
                if opts.short_value.contains(c) {
                    // The value is the rest of the cluster, or the next word.
                    if k + c.len_utf8() == cluster.len() {
                        step = 2;
                    }
                    break;
                }
            }
            i += step;
        } else {
            return i;
        }
    }
    i
}

fn is_assignment(w: &Word) -> bool {
    !w.dynamic
        && w.text.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

fn literal(text: &str) -> Word {
    Word {
        text: text.to_string(),
        dynamic: false,
    }
}

/// `env`'s operands: its options skipped (`-S` strings split into words), then assignments.
fn env_operands(words: &[Word]) -> Vec<Word> {
    let mut i = 0;
    let mut split = Vec::new();
    while i < words.len() {
        let w = &words[i];
        let t = w.text.as_str();
        if w.dynamic || !t.starts_with('-') || t == "-" {
            break;
        }
        i += 1;
        if t == "--" {
            break;
        }
        let value = if let Some(v) = t.strip_prefix("--split-string=") {
            Some(v.to_string())
        } else if t == "--split-string" || t == "-S" {
            let v = words.get(i).map(|w| w.text.clone());
            i += 1;
            v
        } else if let Some(v) = t.strip_prefix("-S") {
            Some(v.to_string())
        } else {
            if matches!(t, "-u" | "-C" | "--unset" | "--chdir") {
                i += 1;
            }
            None
        };
        if let Some(v) = value {
            split.extend(v.split_whitespace().map(literal));
        }
    }
    while i < words.len() && is_assignment(&words[i]) {
        i += 1;
    }
    split.extend(words[i.min(words.len())..].iter().cloned());
    split
}

/// One simple command: report it, then what it runs.
fn simple(mut words: Vec<Word>, depth: usize, out: &mut Analysis) {
    loop {
        let Some(first) = words.first() else { return };
        if first.dynamic {
            out.unjudgeable.push(format!(
                "the command name is computed when it runs: {}",
                first.text
            ));
            return;
        }
        let program = program_name(&first.text);
        let rest = &words[1..];
        out.commands.push(Command {
            program: program.clone(),
            args: rest.iter().map(|w| w.text.clone()).collect(),
        });
        if program == "env" {
            words = env_operands(rest);
            continue;
        }
        if let Some(opts) = wrapper_opts(&program) {
            let mut start = skip_options(rest, &opts);
            if program == "timeout" && start < rest.len() {
                start += 1; // the duration
            }
            words = rest[start.min(rest.len())..].to_vec();
            continue;
        }
        match program.as_str() {
            "eval" => {
                out.unjudgeable
                    .push("`eval` runs text as a command".to_string());
                if rest.iter().all(|w| !w.dynamic) {
                    let joined: Vec<&str> = rest.iter().map(|w| w.text.as_str()).collect();
                    script(&joined.join(" "), depth + 1, out);
                }
            }
            "source" | "." => out
                .unjudgeable
                .push(format!("`{program}` runs the commands of a file")),
            "find" => find_exec(rest, depth, out),
            p if SHELLS.contains(&p) => shell(p, rest, depth, out),
            _ => {}
        }
        return;
    }
}

/// `find`'s `-exec`-style actions.
fn find_exec(args: &[Word], depth: usize, out: &mut Analysis) {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        i += 1;
        if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") && !args[i - 1].dynamic {
            let start = i;
            while i < args.len() && !matches!(args[i].text.as_str(), ";" | "+") {
                i += 1;
            }
            simple(args[start..i].to_vec(), depth, out);
        }
    }
}

/// A shell's command line: its `-c` script parsed, or why it cannot be judged.
fn shell(name: &str, args: &[Word], depth: usize, out: &mut Analysis) {
    let mut has_c = false;
    let mut informational = false;
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        let t = w.text.as_str();
        if w.dynamic {
            break;
        }
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            informational |= matches!(long, "version" | "help");
            i += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
        } else if t.len() > 1 && (t.starts_with('-') || t.starts_with('+')) {
            let cluster = &t[1..];
            has_c |= t.starts_with('-') && cluster.contains('c');
            i += if cluster.ends_with('o') || cluster.ends_with('O') {
                2
            } else {
                1
            };
        } else {
            break;
        }
    }
    match args.get(i) {
        Some(script_word) if has_c => {
            if script_word.dynamic {
                out.unjudgeable.push(format!(
                    "`{name} -c` runs a script computed when it runs: {}",
                    script_word.text
                ));
            } else {
                script(&script_word.text, depth + 1, out);
            }
        }
        Some(_) if !has_c => out
            .unjudgeable
            .push(format!("`{name}` runs the commands of a script file")),
        _ if informational => {}
        _ => out
            .unjudgeable
            .push(format!("`{name}` reads its commands from stdin")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<String> {
        analyse(line).commands.iter().map(Command::text).collect()
    }

    fn judged(line: &str) -> bool {
        analyse(line).unjudgeable.is_empty()
    }

    #[test]
    fn wrappers_are_stripped_level_by_level() {
        assert_eq!(texts("env rm -rf x"), vec!["env rm -rf x", "rm -rf x"]);
        assert_eq!(
            texts("env -i -u HOME FOO=1 BAR=2 /bin/rm -rf x"),
            vec!["env -i -u HOME FOO=1 BAR=2 /bin/rm -rf x", "rm -rf x"]
        );
        assert_eq!(texts("env -S 'rm -rf' x").last().unwrap(), "rm -rf x");
        assert_eq!(texts("command -p rm -rf x").last().unwrap(), "rm -rf x");
        assert_eq!(texts("exec -a name rm -rf x").last().unwrap(), "rm -rf x");
        assert_eq!(texts("nice -n 5 rm -rf x").last().unwrap(), "rm -rf x");
        assert_eq!(texts("nice -10 rm -rf x").last().unwrap(), "rm -rf x");
        assert_eq!(texts("nohup rm -rf x").last().unwrap(), "rm -rf x");
        assert_eq!(
            texts("timeout -s KILL -k 1 5 rm -rf x").last().unwrap(),
            "rm -rf x"
        );
        assert_eq!(
            texts("timeout --signal=KILL 5s rm -rf x").last().unwrap(),
            "rm -rf x"
        );
        assert_eq!(texts("time -p rm -rf x").last().unwrap(), "rm -rf x");
        assert_eq!(
            texts("sudo -u root nice nohup timeout 5 env A=1 rm -rf x")
                .last()
                .unwrap(),
            "rm -rf x"
        );
        assert_eq!(
            texts("echo x | xargs -n 1 rm -rf").last().unwrap(),
            "rm -rf"
        );
        assert_eq!(
            texts("find . -name a -exec rm -rf {} ;").last().unwrap(),
            "rm -rf {}"
        );
        assert_eq!(texts("busybox rm -rf x").last().unwrap(), "rm -rf x");
        assert!(texts("exec").is_empty() || texts("exec") == vec!["exec"]);
    }

    #[test]
    fn nested_shells_are_parsed() {
        assert_eq!(texts("bash -c 'rm -rf x'").last().unwrap(), "rm -rf x");
        assert_eq!(texts("sh -ec \"rm -rf x\"").last().unwrap(), "rm -rf x");
        assert_eq!(
            texts("bash -c \"sh -c 'env rm -rf x'\"").last().unwrap(),
            "rm -rf x"
        );
        assert!(judged("bash -c 'rm -rf x'"));
        assert!(judged("bash --version"));
    }

    #[test]
    fn unjudgeable_is_named() {
        assert!(!judged("eval \"$X\""));
        assert!(!judged("eval 'rm -rf x'"));
        assert_eq!(texts("eval 'rm -rf x'").last().unwrap(), "rm -rf x");
        assert!(!judged("$CMD -rf x"));
        assert!(!judged("$(echo rm) -rf x"));
        assert!(!judged("/bin/r? -rf x"));
        assert!(!judged("curl x | sh"));
        assert!(!judged("bash <<EOF\nrm -rf x\nEOF"));
        assert!(!judged("bash script.sh"));
        assert!(!judged("bash -c \"$X\""));
        assert!(!judged("source ./env.sh"));
        assert!(!judged("rm -rf x; if then"));
        assert!(!judged("env $X -rf"));
        let deep = (0..12).fold("rm -rf x".to_string(), |s, _| {
            format!("sh -c {}", shell_quote(&s))
        });
        assert!(!judged(&deep));
        assert!(judged("rm -rf x && ls | grep rm"));
    }

    fn shell_quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

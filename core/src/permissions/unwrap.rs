//! From a command line to the programs it runs: wrappers stripped, program paths normalised,
//! nested shells parsed, and what cannot be judged statically named.
//!
//! Invariants:
//! - Wrappers that run their operands as a command — `env` (its options, a mere `-`,
//!   every operand holding a `=` taken as an assignment, as env takes it, and `-S` strings
//!   split as env splits them), `command`, `builtin`, `exec`, `nice`, `nohup`, `setsid`,
//!   `timeout` (options and duration), `time`, `sudo`, `doas`, `stdbuf`, `ionice`, `xargs`,
//!   `busybox`, and a reserved word in a command name's place (`! ! cmd`, `! if …`,
//!   `time { …; }`) — are stripped with their own options as their parsers read them
//!   ([`super::wrappers`]: values attached or separate, inside a cluster, long names
//!   abbreviated), repeatedly. Each level is reported, so a rule naming the wrapper still
//!   matches.
//! - `find … -exec|-execdir|-ok|-okdir CMD … ;|+` reports `CMD …` as well; `trap ACTION
//!   SIGNAL…` has its action parsed as a `-c` script (bash runs it when the signal comes).
//! - A shell (`sh`, `bash`, `dash`, `zsh`, `ksh`, `mksh`, `ash`, `yash`, `posh`) with `-c`
//!   and a literal script has that script parsed the same way, up to [`MAX_DEPTH`] levels.
//! - The program is its path's last component: `/bin/rm` and `./rm` are `rm`. A command name
//!   written as a glob (`r?`, `/bin/[r]m`) is reported as a pattern ([`Command::pattern`]) and
//!   is also read as the first wrapper or shell it may name; a glob in the directory alone
//!   (`/b?n/rm`) leaves the program known.
//! - Unjudgeable, with a reason in [`Analysis::unjudgeable`]: a command name computed at run
//!   time (a variable, a substitution, a glob, `xargs -I R` with `R` in it), `eval`, a
//!   computed `trap` action, `source`/`.`, a shell reading its
//!   commands from stdin (`… | sh`) or from a script file, a shell whose `-c` script is computed,
//!   nesting deeper than [`MAX_DEPTH`], and a line that does not parse. The commands that were
//!   recognised are still reported (a static `eval` string is also parsed).

use super::bash::{self, Word};
use super::pattern;
use super::wrappers::{self, Step};

/// How many nested `sh -c` / `eval` levels are parsed.
pub const MAX_DEPTH: usize = 8;

/// How many wrappers around one command are read (`env nice timeout 5 …`); a line with more
/// matches every `shell` rule, as one too big to read does.
pub const MAX_WRAPPERS: usize = 64;

/// One program run with its arguments (values after quote removal; a run-time value is its
/// source text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The program's name (its path's last component).
    pub program: String,
    /// The arguments.
    pub args: Vec<String>,
    /// The program is a bash pattern (its command name was a glob): it names every program it
    /// matches.
    pub pattern: bool,
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
    /// Its substitutions nest deeper than [`super::lex::MAX_NESTING`], a word brace-expands
    /// into more than [`super::lex::MAX_WORDS`] words, it and the scripts it runs hold more
    /// than [`super::lex::MAX_PIPES`] pipes or expand braces into more than
    /// [`super::lex::MAX_EXPANSION`] pieces, or a command has more than [`MAX_WRAPPERS`]
    /// wrappers: what lies past that was not read at all, so every `shell`
    /// rule, deny rules included, matches it.
    pub too_big: bool,
    /// What the line and the scripts it runs have read, against the line's bounds.
    pub tally: super::lex::Tally,
}

/// Analyse one command line.
pub fn analyse(line: &str) -> Analysis {
    let mut out = Analysis::default();
    script(line, 0, &mut out);
    out
}

fn script(src: &str, depth: usize, out: &mut Analysis) {
    // Past a bound nothing more is read: the line already matches every `shell` rule.
    if out.too_big {
        return;
    }
    if depth > MAX_DEPTH {
        out.unjudgeable
            .push(format!("shells nested deeper than {MAX_DEPTH} levels"));
        return;
    }
    let parsed = bash::parse_counting(src, &mut out.tally);
    if parsed.too_big {
        out.too_big = true;
        out.unjudgeable.push(format!(
            "too big to read: substitutions nested deeper than {} levels, more than {} pipes, \
             a word brace-expanding into more than {} words, or braces expanding into more \
             than {} characters",
            super::lex::MAX_NESTING,
            super::lex::MAX_PIPES,
            super::lex::MAX_WORDS,
            super::lex::MAX_EXPANSION
        ));
    } else if parsed.broken {
        out.unjudgeable
            .push("the command line does not parse as bash".to_string());
    }
    for words in parsed.commands {
        simple(words, depth, 0, out);
    }
}

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh",
];

/// Every program name this module treats specially: a command name written as a glob that
/// matches one of them is read as that program too.
fn known_programs() -> impl Iterator<Item = &'static str> {
    const OTHERS: &[&str] = &[
        "env", "command", "builtin", "busybox", "nohup", "setsid", "exec", "nice", "timeout",
        "time", "sudo", "doas", "stdbuf", "ionice", "xargs", "eval", "source", ".", "find", "trap",
    ];
    OTHERS.iter().chain(SHELLS).copied()
}

/// The last component of a program path.
fn program_name(word: &str) -> String {
    match word.rsplit('/').next() {
        Some(last) if !last.is_empty() => last.to_string(),
        _ => word.to_string(),
    }
}

/// Skip a wrapper's options (and the variables it takes among them,
/// [`wrappers::Opts::assignments`]); the index of its first operand.
fn skip_options(words: &[Word], opts: &wrappers::Opts) -> usize {
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w.dynamic {
            return i;
        }
        match wrappers::step(opts, &w.text) {
            Step::Operand if opts.assignments && is_wrapper_assignment(&w.text) => i += 1,
            Step::Operand => return i,
            Step::EndOfOptions => return i + 1,
            Step::Option { takes_next, .. } => i += if takes_next { 2 } else { 1 },
        }
    }
    i
}

/// Whether a wrapper taking variables among its options (sudo; not after `--`) takes the
/// word as one rather than as the command: it holds a `=` and does not start with `/`.
fn is_wrapper_assignment(w: &str) -> bool {
    !w.starts_with('/') && w.contains('=')
}

/// Whether env puts the word in the environment rather than running it: GNU env and
/// busybox's take every operand holding a `=` as an assignment, whatever comes before it
/// (`a-b=1` and `=x` too, which a shell would run as a command). A computed word is not known
/// to be one.
fn is_assignment(w: &Word) -> bool {
    !w.dynamic && w.text.contains('=')
}

/// `env`'s operands: its options skipped, each `-S` string split into words (env reads its
/// options again over them, as GNU env does), a mere `-` ending the options, then the
/// assignments (every word holding a `=`) skipped.
fn env_operands(words: &[Word]) -> Vec<Word> {
    let mut words = words.to_vec();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w.dynamic {
            break;
        }
        if w.text == "-" {
            i += 1;
            break;
        }
        if !w.text.starts_with('-') {
            break;
        }
        let (takes_next, value) = match wrappers::step(&wrappers::ENV, &w.text) {
            Step::Operand => break,
            Step::EndOfOptions => {
                i += 1;
                break;
            }
            Step::Option { takes_next, value } => (takes_next, value),
        };
        let split = match (value, takes_next) {
            (Some((opt, v)), _) if opt == "S" || opt == "split-string" => Some(v),
            (None, true) if is_split(&w.text) => words.get(i + 1).map(|w| w.text.clone()),
            _ => None,
        };
        i += if takes_next { 2 } else { 1 };
        if let Some(text) = split {
            let mut rest = env_split(&text);
            rest.extend(words[i.min(words.len())..].iter().cloned());
            words = rest;
            i = 0;
        }
    }
    while i < words.len() && is_assignment(&words[i]) {
        i += 1;
    }
    words[i.min(words.len())..].to_vec()
}

/// Whether an option word of env, taking the next word as its value, is `-S`.
fn is_split(w: &str) -> bool {
    match w.strip_prefix("--") {
        Some(long) => {
            wrappers::long(&wrappers::ENV, long).is_some_and(|(n, _)| n == "split-string")
        }
        None => w.ends_with('S'),
    }
}

/// `env -S`'s own splitting: blanks separate; `'…'` is literal but for `\\` and `\'`; `"…"`
/// and unquoted text know `\\`, `\"`, `\'`, `\$`, `\#`, `\_` (a space inside `"…"`, a separator
/// outside), `\f`, `\n`, `\r`, `\t`, `\v`, and `\c` (the rest is ignored); `#` starting a word
/// starts a comment; a word holding `${…}` is computed when it runs.
fn env_split(s: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut in_word, mut dynamic) = (false, false);
    let mut quote: Option<char> = None;
    let mut chars = s.chars().peekable();
    let mut push = |cur: &mut String, in_word: &mut bool, dynamic: &mut bool| {
        if *in_word {
            out.push(Word {
                text: std::mem::take(cur),
                dynamic: *dynamic,
                pattern: None,
            });
        }
        *in_word = false;
        *dynamic = false;
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c') => {
                push(&mut cur, &mut in_word, &mut dynamic)
            }
            (None, '#') if !in_word => break,
            (Some('\''), '\\') => match chars.peek() {
                Some('\\' | '\'') => cur.push(chars.next().unwrap_or('\\')),
                _ => cur.push('\\'),
            },
            (_, '\\') => {
                in_word = true;
                match chars.next() {
                    Some('c') => break,
                    Some('_') if quote.is_none() => push(&mut cur, &mut in_word, &mut dynamic),
                    Some('_') => cur.push(' '),
                    Some('f') => cur.push('\x0c'),
                    Some('n') => cur.push('\n'),
                    Some('r') => cur.push('\r'),
                    Some('t') => cur.push('\t'),
                    Some('v') => cur.push('\x0b'),
                    Some(e) => cur.push(e),
                    None => {}
                }
            }
            (q, '$') if q != Some('\'') => {
                in_word = true;
                dynamic = true;
                cur.push('$');
            }
            (_, c) => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    push(&mut cur, &mut in_word, &mut dynamic);
    out
}

/// One simple command: report it, then what it runs. `first_level`: how many wrappers were
/// read around it already (a `find -exec` counts as one).
fn simple(mut words: Vec<Word>, depth: usize, first_level: usize, out: &mut Analysis) {
    if out.too_big {
        return;
    }
    for level in first_level.. {
        // Each level reports its words, so reading thousands of wrappers would take the
        // square of the line's length: no command has this many.
        if level > MAX_WRAPPERS {
            out.too_big = true;
            out.unjudgeable.push(format!(
                "too big to read: wrappers nested deeper than {MAX_WRAPPERS} levels"
            ));
            return;
        }
        let Some(first) = words.first() else { return };
        let rest = &words[1..];
        let program = match (&first.pattern, first.dynamic) {
            (_, false) => program_name(&first.text),
            (None, true) => {
                out.unjudgeable.push(format!(
                    "the command name is computed when it runs: {}",
                    first.text
                ));
                return;
            }
            (Some(p), true) => {
                let name = program_name(p);
                match pattern::literal(&name) {
                    // A glob in the directory only: the program is known.
                    Some(known) => known,
                    None => {
                        out.unjudgeable.push(format!(
                            "the command name is a glob, expanded when it runs: {}",
                            first.text
                        ));
                        out.commands.push(Command {
                            program: name.clone(),
                            args: rest.iter().map(|w| w.text.clone()).collect(),
                            pattern: true,
                        });
                        // Read it also as the first wrapper or shell it may name.
                        match known_programs().find(|k| pattern::matches(&name, k)) {
                            Some(k) => k.to_string(),
                            None => return,
                        }
                    }
                }
            }
        };
        out.commands.push(Command {
            program: program.clone(),
            args: rest.iter().map(|w| w.text.clone()).collect(),
            pattern: false,
        });
        if program == "env" {
            words = env_operands(rest);
            continue;
        }
        if let Some(opts) = wrappers::options(&program) {
            let mut start = skip_options(rest, opts);
            if program == "timeout" {
                start += 1; // the duration
            }
            // `xargs -I R` puts its input where `R` stands, in the command name too.
            if program == "xargs" {
                let name = rest.get(start).map(|w| w.text.as_str()).unwrap_or("");
                if let Some(r) = xargs_replace(rest, opts)
                    .into_iter()
                    .find(|r| name.contains(r.as_str()))
                {
                    out.unjudgeable.push(format!(
                        "the command name is computed when it runs: `xargs` replaces {r} in {name}"
                    ));
                    return;
                }
            }
            // (A `timeout` with no duration runs nothing: the bound leaves no words.)
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
            "find" => find_exec(rest, depth, level, out),
            "trap" => trap(rest, depth, out),
            p if SHELLS.contains(&p) => shell(p, rest, depth, out),
            _ => {}
        }
        return;
    }
}

/// The replace strings `xargs` is given (`-I R`, `-IR`, `-iR`, a bare `-i`, `--replace=R`, a
/// bare `--replace`: `{}`), read as its options are.
fn xargs_replace(args: &[Word], opts: &wrappers::Opts) -> Vec<String> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(w) = args.get(i) {
        if w.dynamic {
            break;
        }
        let t = w.text.as_str();
        let long = t
            .strip_prefix("--")
            .and_then(|n| wrappers::long(opts, n.split('=').next().unwrap_or(n)))
            .map(|(full, _)| full);
        match wrappers::step(opts, t) {
            Step::Operand | Step::EndOfOptions => break,
            Step::Option { takes_next, value } => {
                match value {
                    Some((name, r)) if matches!(name.as_str(), "I" | "i" | "replace") => {
                        found.push(r)
                    }
                    Some(_) => {}
                    // The option taking the next word is the cluster's last letter.
                    None if takes_next && long.is_none() && t.ends_with('I') => {
                        found.extend(args.get(i + 1).map(|n| n.text.clone()));
                    }
                    None if long == Some("replace") || (long.is_none() && t.ends_with('i')) => {
                        found.push("{}".to_string())
                    }
                    None => {}
                }
                i += if takes_next { 2 } else { 1 };
            }
        }
    }
    found.retain(|r| !r.is_empty());
    found
}

/// `trap ACTION SIGNAL…`: bash runs `ACTION` as a command line when a signal comes (`EXIT`:
/// when the shell ends); it is parsed as a `-c` script is. A mere `-`, a signal number first,
/// one operand, `-l` or `-p` set no action.
fn trap(args: &[Word], depth: usize, out: &mut Analysis) {
    let start = match args.first() {
        Some(w) if !w.dynamic && w.text == "--" => 1,
        Some(w) if !w.dynamic && w.text.len() > 1 && w.text.starts_with('-') => return,
        _ => 0,
    };
    let [action, _, ..] = &args[start.min(args.len())..] else {
        return;
    };
    if action.dynamic {
        out.unjudgeable.push(format!(
            "`trap` runs a command computed when it runs: {}",
            action.text
        ));
        return;
    }
    let t = action.text.as_str();
    if t == "-" || (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())) {
        return;
    }
    script(t, depth + 1, out);
}

/// `find`'s `-exec`-style actions.
fn find_exec(args: &[Word], depth: usize, level: usize, out: &mut Analysis) {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        i += 1;
        if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") && !args[i - 1].dynamic {
            let start = i;
            while i < args.len() && !matches!(args[i].text.as_str(), ";" | "+") {
                i += 1;
            }
            simple(args[start..i].to_vec(), depth, level + 1, out);
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
    fn after_a_double_dash_a_shell_takes_a_script_file_not_options() {
        // As bash has it: `bash -- -c 'echo hi'` runs a script file named `-c`
        // ("-c: No such file or directory").
        let a = analyse("bash -- -c 'rm -rf x'");
        assert!(
            a.unjudgeable
                .iter()
                .any(|u| u.contains("runs the commands of a script file")),
            "{:?}",
            a.unjudgeable
        );
        // The control: before `--`, `-c` takes the script.
        assert!(judged("bash -c 'rm -rf x'"));
        assert_eq!(texts("bash -c 'rm -rf x'").last().unwrap(), "rm -rf x");
    }

    #[test]
    fn wrappers_are_stripped_level_by_level() {
        assert_eq!(texts("env rm -rf x"), vec!["env rm -rf x", "rm -rf x"]);
        assert_eq!(
            texts("env -i -u HOME FOO=1 BAR=2 /bin/rm -rf x"),
            vec!["env -i -u HOME FOO=1 BAR=2 /bin/rm -rf x", "rm -rf x"]
        );
        assert_eq!(texts("env -S 'rm -rf' x").last().unwrap(), "rm -rf x");
        // An env of options or assignments alone runs nothing but itself (it prints the
        // environment); one whose option lacks its value is left as written.
        for alone in [
            "env -i",
            "env -0",
            "env -i FOO=1",
            "env -",
            "env -u",
            "env -S",
        ] {
            assert_eq!(texts(alone), vec![alone], "{alone}");
        }
        // A globbed name is read also as the first wrapper or shell it may name, so what that
        // would run is judged too; one that names none is itself alone.
        assert_eq!(
            texts("e?v rm -rf x"),
            ["e?v rm -rf x", "env rm -rf x", "rm -rf x"]
        );
        assert_eq!(
            texts("/usr/bin/s[u]do rm -rf x").last().unwrap(),
            "rm -rf x"
        );
        assert_eq!(texts("/bin/ba*h -c 'rm -rf x'").last().unwrap(), "rm -rf x");
        assert_eq!(texts("l? rm -rf x"), ["l? rm -rf x"]);
        // A glob in the directory only leaves the program known.
        assert!(judged("/usr/b*/rm -rf x"));
        assert_eq!(texts("/usr/b*/rm -rf x").last().unwrap(), "rm -rf x");
        // Every word holding a `=` is an assignment to env, whatever its name (GNU env and
        // busybox's alike put it in the environment), unlike a shell's own assignments.
        for line in [
            "env MY_VAR=1 _X=2 A1=3 rm -rf x",
            "env a-b=1 rm -rf x",
            "env =x rm -rf x",
            "env 1a=2 rm -rf x",
            "env -i a.b=1 rm -rf x",
            "env 'a b=1' rm -rf x",
        ] {
            assert_eq!(texts(line).last().unwrap(), "rm -rf x", "{line}");
        }
        // A computed word is no known assignment: the command name is computed.
        assert!(!judged("env $A=1 rm -rf x"));
        // In `-S`'s string a `#` starting a word starts a comment; inside a word it is a `#`.
        assert_eq!(texts("env -S 'rm -rf x #y z'").last().unwrap(), "rm -rf x");
        assert_eq!(texts("env -S 'rm a#b'").last().unwrap(), "rm a#b");
        // In single quotes only `\\` and `\'` are escapes, as GNU env has it.
        let words = |s: &str| env_split(s).into_iter().map(|w| w.text).collect::<Vec<_>>();
        assert_eq!(words(r"'a\\b\'c\d' e"), [r"a\b'c\d", "e"]);
        // `\_` is a space inside double quotes and a separator outside.
        assert_eq!(words(r#""a\_b" c\_d"#), ["a b", "c", "d"]);
        // A `$` in single quotes is a `$`; in double quotes it is a variable.
        assert_eq!(texts(r#"env -S "rm 'a\$b'""#).last().unwrap(), "rm a$b");
        // So a quoted `$` in the program's name leaves it a name, not one computed at run time.
        let a = analyse(r#"env -S "'r\$m' x""#);
        assert!(a.unjudgeable.is_empty(), "{:?}", a.unjudgeable);
        assert_eq!(a.commands.last().unwrap().text(), "r$m x");
        // Unquoted or in double quotes, a `$` in the program's name is computed at run time:
        // the line cannot be judged.
        for line in [r#"env -S '$P -rf x'"#, r#"env -S '"r$M" -rf x'"#] {
            let a = analyse(line);
            assert!(!a.unjudgeable.is_empty(), "{line}: {:?}", a.commands);
        }
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
        // Without a duration (or a command after it) there is nothing more to judge.
        assert_eq!(texts("timeout -k 1"), ["timeout -k 1"]);
        assert_eq!(texts("timeout 5"), ["timeout 5"]);
        assert_eq!(texts("time -p rm -rf x").last().unwrap(), "rm -rf x");
        // sudo sets the variables given among its options (`VAR=value`, any word holding a
        // `=` but for one starting with `/`); after `--` the first word is the command.
        for line in [
            "sudo A=1 rm -rf x",
            "sudo -u root A=1 -n a-b=2 rm -rf x",
            "sudo =x --user=root rm -rf x",
        ] {
            assert_eq!(texts(line).last().unwrap(), "rm -rf x", "{line}");
        }
        for (line, runs) in [
            ("sudo -- A=1 rm -rf x", "A=1 rm -rf x"),
            ("sudo /x=1 rm -rf x", "x=1 rm -rf x"),
        ] {
            assert_eq!(texts(line).last().unwrap(), runs, "{line}");
        }
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
        // `MAX_DEPTH` shells are parsed down to the innermost command; one more is not.
        let deep = |levels: usize| {
            (0..levels).fold("rm -rf x".to_string(), |s, _| {
                format!("sh -c {}", shell_quote(&s))
            })
        };
        assert!(judged(&deep(MAX_DEPTH)));
        assert_eq!(texts(&deep(MAX_DEPTH)).last().unwrap(), "rm -rf x");
        assert!(!judged(&deep(MAX_DEPTH + 1)));
        assert!(!judged(&deep(12)));
        assert!(judged("rm -rf x && ls | grep rm"));
    }

    /// Every command name of up to four program and glob characters, first in a line, after
    /// an assignment, after another command and after a redirection, is the program judged:
    /// the grammar misreads some (`e?v`, `!ls`), which the normaliser guards against. `[`,
    /// `[[` and `!` are the test commands and the reserved word.
    #[test]
    fn no_command_name_of_program_and_glob_characters_is_misread() {
        const ALPHABET: [char; 10] = ['a', '1', '_', '-', '.', '?', '*', '[', ']', '!'];
        let mut words = vec![String::new()];
        let mut misread = Vec::new();
        for _ in 0..4 {
            words = words
                .iter()
                .flat_map(|w| ALPHABET.iter().map(move |c| format!("{w}{c}")))
                .collect();
            for w in words
                .iter()
                .filter(|w| !["[", "[[", "!"].contains(&w.as_str()))
            {
                for line in [
                    format!("{w} x"),
                    format!("a=1 {w} x"),
                    format!("echo; {w} x"),
                    format!("2>f {w} x"),
                ] {
                    let a = analyse(&line);
                    if !a.commands.iter().any(|c| c.program == *w) {
                        misread.push(format!("{line:?} ran {:?}", texts(&line)));
                    }
                }
            }
        }
        assert!(misread.is_empty(), "{}", misread.join("\n"));
    }

    /// Every spelling of `xargs`'s replace option makes a command name holding its string
    /// computed (the input is put there); the same string among the arguments only, or an
    /// option that is no replace option, leaves the name judged.
    #[test]
    fn xargs_replacing_in_the_command_name_is_unjudgeable() {
        for (opts, r) in [
            ("-I{}", "{}"),
            ("-I {}", "{}"),
            ("-IX", "X"),
            ("-I X", "X"),
            ("-0I X", "X"),
            ("-0IX", "X"),
            ("-i", "{}"),
            ("-iX", "X"),
            ("-0i", "{}"),
            ("-t -i", "{}"),
            ("--replace", "{}"),
            ("--replace=X", "X"),
            ("--rep", "{}"),
            ("--rep=X", "X"),
            ("-n1 -I X", "X"),
            ("-I X -n1", "X"),
        ] {
            for computed in [
                format!("xargs {opts} {r} -rf x"),
                format!("xargs {opts} a{r}b x"),
            ] {
                assert!(!judged(&computed), "{computed}");
            }
            let named = format!("xargs {opts} rm -rf {r}");
            assert!(judged(&named), "{named}");
            assert_eq!(texts(&named).last().unwrap(), &format!("rm -rf {r}"));
        }
        for line in [
            "xargs {} -rf x",
            "xargs -n1 1 x",
            "xargs -ni i x",
            "xargs -a I I x",
            "xargs -0 {} -rf x",
            "xargs -r -t {} x",
            "xargs --verbose {} x",
        ] {
            assert!(judged(line), "{line}");
        }
    }

    /// Bash rejects `coproc` or `!` right after `coproc`; they are read as reserved words
    /// there all the same (the stricter reading), so a compound command after them, with
    /// the name `coproc` takes before one, is still read as commands.
    #[test]
    fn a_second_coproc_or_bang_after_coproc_is_read_as_reserved() {
        for line in [
            "coproc coproc n { rm -rf x; }",
            "coproc ! coproc n { rm -rf x; }",
            "coproc coproc ! coproc n ( rm -rf x )",
        ] {
            assert_eq!(texts(line), ["rm -rf x"], "{line}");
        }
    }

    /// Each line runs `rm -rf x` among its commands.
    fn runs_rm(lines: &[&str]) {
        for line in lines {
            assert!(
                texts(line).contains(&"rm -rf x".to_string()),
                "{line}: {:?}",
                texts(line)
            );
        }
    }

    /// A lone `-` is an operand to every wrapper, as getopt reads it: the program it runs is
    /// one named `-`, and what follows is that program's arguments. Only `env` reads it as an
    /// option (an empty environment) and runs what follows.
    #[test]
    fn a_lone_dash_is_the_program_every_wrapper_but_env_runs() {
        for w in [
            "command",
            "builtin",
            "busybox",
            "nohup",
            "setsid",
            "exec",
            "nice",
            "timeout 5",
            "time",
            "sudo",
            "doas",
            "stdbuf -o0",
            "ionice",
            "xargs",
        ] {
            let line = format!("{w} - rm -rf x");
            assert!(
                !texts(&line).contains(&"rm -rf x".to_string()),
                "{line}: {:?}",
                texts(&line)
            );
            assert!(
                texts(&line).iter().any(|t| t.starts_with("- rm")),
                "{line}: {:?}",
                texts(&line)
            );
        }
        runs_rm(&["env - rm -rf x", "env -i - rm -rf x"]);
    }

    /// Bash runs the substitutions in the name `coproc` takes before a compound command, in
    /// either spelling; a plain name runs nothing.
    #[test]
    fn a_coproc_name_has_its_substitutions_judged() {
        runs_rm(&[
            "coproc n$(rm -rf x) { :; }",
            "coproc $(rm -rf x)n ( : )",
            "coproc n`rm -rf x` { :; }",
            "coproc `rm -rf x`n ( : )",
        ]);
        assert_eq!(texts("coproc n { ls; }"), ["ls"]);
    }

    /// Where bash runs a reserved word as a program (after an assignment or a redirection),
    /// what follows it is still judged as a command.
    #[test]
    fn a_reserved_word_run_as_a_program_has_what_follows_judged() {
        runs_rm(&[
            "a=1 ! rm -rf x",
            ">f ! rm -rf x",
            "a=1 { rm -rf x; }",
            "a=1 if rm -rf x; then :; fi",
            "a=1 while rm -rf x; do :; done",
            "a=1 do rm -rf x",
            "a=1 coproc rm -rf x",
            "a=1 time rm -rf x",
        ]);
    }

    /// A trap's action is parsed as a script; forms that set no action run nothing.
    #[test]
    fn a_trap_action_is_parsed_as_a_script() {
        for line in [
            "trap 'rm -rf x' EXIT",
            "trap -- 'rm -rf x' EXIT",
            "trap 'rm -rf x' INT TERM",
            "trap \"rm -rf x\" 0",
            "t?ap 'rm -rf x' EXIT",
        ] {
            assert_eq!(texts(line).last().unwrap(), "rm -rf x", "{line}");
        }
        assert!(judged("trap 'rm -rf x' EXIT"));
        for line in [
            "trap 'rm -rf x'",
            "trap - EXIT",
            "trap 0 'rm -rf x'",
            "trap -p 'rm -rf x' EXIT",
            "trap -l",
            "trap",
        ] {
            assert_eq!(texts(line).len(), 1, "{line}: {:?}", texts(line));
        }
        assert!(!judged("trap \"$X\" EXIT"));
    }

    fn shell_quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

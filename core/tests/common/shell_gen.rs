//! Generators of shell command lines for the permission rules' property tests: a base command
//! (one the rules must deny or ask about, or a near miss they must leave alone), its program
//! spelled in every quoting and glob form bash accepts, and layers around it: every wrapper the
//! parser knows (with each of its option forms, attached and separate), nested shells, `eval`,
//! substitutions, subshells, groups, lists and pipelines.
//!
//! Each form is written as bash reads it, so the same generated line can be run by the real
//! bash (`shell_rules_bash.rs`) to check that it really runs the base command.

#![allow(dead_code)]

use quickcheck::{Arbitrary, Gen};

/// `s` as one single-quoted bash word.
pub fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s` as one double-quoted bash word.
pub fn dq(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if matches!(c, '\\' | '"' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A command line and whether it is one simple command (a wrapper can be put before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    pub simple: bool,
    /// It holds something the parser cannot judge statically by design (`eval`, a glob in the
    /// command name): it may then be asked about even when it is a near miss.
    pub unjudgeable: bool,
}

/// How the program word is spelled. `{p}` is the program, `{P}` its path in `/usr/bin`; the
/// glob forms are written out by [`spell`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    BackslashFirst,
    BackslashEach,
    EmptySingleInside,
    EmptyDoubleInside,
    /// `r''\m`: an empty quote, then the rest each behind a backslash.
    QuoteThenEscapes,
    HalfQuoted,
    AnsiC,
    AnsiCHex,
    AnsiCOctal,
    AnsiCUnicode,
    /// `$'\u72\u6d'`: each character as `\u` with the fewest hex digits, so each escape ends
    /// at the next backslash, short of its four.
    AnsiCShortUnicode,
    Translated,
    AbsolutePath,
    DottedPath,
    QuotedPath,
    BackslashNewline,
    /// `"r\<newline>m"`: a line continuation inside double quotes (removed there too).
    DoubleQuotedBackslashNewline,
    /// `r?`: the program's last character as `?`.
    GlobQuestion,
    /// `g?t`: the program's second character as `?` (letters on both sides for longer names).
    GlobQuestionSecond,
    /// `r*`: everything after the first character as `*`.
    GlobStar,
    /// `[r]m`: the first character as a bracket expression.
    GlobBracket,
    /// `r[a-z]`: the last character as a range.
    GlobRange,
    /// `r[!_]`: the last character as a negated bracket.
    GlobNegated,
    /// `/usr/bin/r?`: a glob in a path.
    GlobPath,
    /// `{rm,}`: a brace expansion giving the program (the empty word is dropped).
    Brace,
    /// `{,rm}`: the same, the empty word first.
    BraceEmptyFirst,
}

impl Spelling {
    pub const ALL: [Spelling; 29] = [
        Spelling::Plain,
        Spelling::SingleQuoted,
        Spelling::DoubleQuoted,
        Spelling::BackslashFirst,
        Spelling::BackslashEach,
        Spelling::EmptySingleInside,
        Spelling::EmptyDoubleInside,
        Spelling::QuoteThenEscapes,
        Spelling::HalfQuoted,
        Spelling::AnsiC,
        Spelling::AnsiCHex,
        Spelling::AnsiCOctal,
        Spelling::AnsiCUnicode,
        Spelling::AnsiCShortUnicode,
        Spelling::Translated,
        Spelling::AbsolutePath,
        Spelling::DottedPath,
        Spelling::QuotedPath,
        Spelling::BackslashNewline,
        Spelling::DoubleQuotedBackslashNewline,
        Spelling::GlobQuestion,
        Spelling::GlobQuestionSecond,
        Spelling::GlobStar,
        Spelling::GlobBracket,
        Spelling::GlobRange,
        Spelling::GlobNegated,
        Spelling::GlobPath,
        Spelling::Brace,
        Spelling::BraceEmptyFirst,
    ];

    /// A glob or brace spelling: the word bash expands (against the file system, for a glob).
    pub fn expands(self) -> bool {
        matches!(
            self,
            Spelling::GlobQuestion
                | Spelling::GlobQuestionSecond
                | Spelling::GlobStar
                | Spelling::GlobBracket
                | Spelling::GlobRange
                | Spelling::GlobNegated
                | Spelling::GlobPath
                | Spelling::Brace
                | Spelling::BraceEmptyFirst
        )
    }

    /// A glob spelling (which the parser cannot resolve without the file system).
    pub fn is_glob(self) -> bool {
        self.expands() && !matches!(self, Spelling::Brace | Spelling::BraceEmptyFirst)
    }
}

/// The program `p` (ASCII letters, at least two) spelled as `s`; `dir` is the absolute
/// directory it lives in (for the path forms).
pub fn spell(p: &str, s: Spelling, dir: &str) -> String {
    let (first, rest) = p.split_at(1);
    let init = &p[..p.len() - 1];
    match s {
        Spelling::Plain => p.to_string(),
        Spelling::SingleQuoted => format!("'{p}'"),
        Spelling::DoubleQuoted => format!("\"{p}\""),
        Spelling::BackslashFirst => format!("\\{p}"),
        Spelling::BackslashEach => p.chars().map(|c| format!("\\{c}")).collect(),
        Spelling::EmptySingleInside => format!("{first}''{rest}"),
        Spelling::EmptyDoubleInside => format!("{first}\"\"{rest}"),
        Spelling::QuoteThenEscapes => format!(
            "{first}''{}",
            rest.chars().map(|c| format!("\\{c}")).collect::<String>()
        ),
        Spelling::HalfQuoted => format!("\"{first}\"'{rest}'"),
        Spelling::AnsiC => format!("$'{p}'"),
        Spelling::AnsiCHex => format!(
            "$'{}'",
            p.bytes().map(|b| format!("\\x{b:02x}")).collect::<String>()
        ),
        Spelling::AnsiCOctal => format!(
            "$'{}'",
            p.bytes().map(|b| format!("\\{b:03o}")).collect::<String>()
        ),
        Spelling::AnsiCUnicode => format!(
            "$'{}{rest}'",
            first
                .chars()
                .map(|c| format!("\\u{:04x}", c as u32))
                .collect::<String>()
        ),
        Spelling::AnsiCShortUnicode => format!(
            "$'{}'",
            p.chars()
                .map(|c| format!("\\u{:x}", c as u32))
                .collect::<String>()
        ),
        Spelling::Translated => format!("$\"{p}\""),
        Spelling::AbsolutePath => format!("{dir}/{p}"),
        Spelling::DottedPath => format!("{dir}/../{}/{p}", last_component(dir)),
        Spelling::QuotedPath => format!("'{dir}/'\"{p}\""),
        Spelling::BackslashNewline => format!("{first}\\\n{rest}"),
        Spelling::DoubleQuotedBackslashNewline => format!("\"{first}\\\n{rest}\""),
        Spelling::GlobQuestion => format!("{init}?"),
        Spelling::GlobQuestionSecond => format!("{first}?{}", &p[2..]),
        Spelling::GlobStar => format!("{first}*"),
        Spelling::GlobBracket => format!("[{first}]{rest}"),
        Spelling::GlobRange => format!("{init}[a-z]"),
        Spelling::GlobNegated => format!("{init}[!_]"),
        Spelling::GlobPath => format!("{dir}/{init}?"),
        Spelling::Brace => format!("{{{p},}}"),
        Spelling::BraceEmptyFirst => format!("{{,{p}}}"),
    }
}

fn last_component(dir: &str) -> &str {
    dir.rsplit('/').next().unwrap_or(dir)
}

/// One layer put around a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// A wrapper before a simple command: `prefix` then the command.
    Prefix(&'static str),
    /// `find` running the command with `-exec` and friends (`{}` is the command).
    Template(&'static str),
    /// `bash -c '…'` and friends: the line as one single-quoted word in `{}`.
    ShellSingle(&'static str),
    /// `sh -c "…"`: the line as one double-quoted word in `{}`.
    ShellDouble(&'static str),
    /// `env -S '…'`: the line split by env itself (only for plain lines).
    EnvSplit(&'static str),
    /// A compound context: `{}` is the line as written.
    Context(&'static str),
    /// Prefix assignments before a simple command (a wrapper after them goes through a shell:
    /// `xargs FOO=1 rm` would run a program named `FOO=1`).
    Assign(&'static str),
    /// A redirection between a simple command's first word and the rest (`rm >/dev/null -rf
    /// x`): bash takes it out wherever it stands, the words around it stay one command.
    Between(&'static str),
}

/// Every wrapper form the parser must see through, as `Prefix` strings. The value an option
/// takes is written both separate and attached; long options both `--opt=v` and `--opt v`.
pub const PREFIXES: &[&str] = &[
    // env
    "env",
    "env -i",
    "env -",
    "env -i -",
    "env -u FOO",
    "env -uFOO",
    "env --unset=FOO",
    "env --unset FOO",
    "env -iu FOO",
    "env -iuFOO",
    "env -vu FOO",
    "env -C /",
    "env -C/",
    "env --chdir=/",
    "env --chdir /",
    "env -iC /",
    "env -iC/",
    "env A=1",
    "env -i A=1 B=2",
    "env -v",
    "env --debug",
    "env --ignore-signal",
    "env --default-signal=PIPE",
    "env --block-signal=INT",
    "env --list-signal-handling",
    "env --",
    "env -i --",
    "env -- A=1",
    "env --uns FOO",
    "env --ch /",
    "env --chdir=/ -u FOO --",
    "env -v -u FOO -i",
    "env -vi -uFOO",
    "env - A=1",
    // env takes every word holding a `=` as an assignment, not only a shell's names
    "env a-b=1 =x 1a=2",
    "env -i a.b=1 --x=1",
    "env --ignore-env",
    "env --default-sig=PIPE",
    // xargs (stdin gives it one line, `x`)
    "xargs",
    "xargs -0",
    "xargs -r",
    "xargs -t",
    "xargs -x",
    "xargs -a /dev/stdin",
    "xargs -a/dev/stdin",
    "xargs --arg-file=/dev/stdin",
    "xargs --arg-file /dev/stdin",
    "xargs -d ,",
    "xargs -d,",
    "xargs --delimiter=,",
    "xargs --delimiter ,",
    "xargs -E EOF",
    "xargs -EEOF",
    "xargs -e",
    "xargs -eEOF",
    "xargs --eof=EOF",
    "xargs -I {}",
    "xargs -I{}",
    "xargs -i",
    "xargs -i{}",
    "xargs --replace",
    "xargs --replace={}",
    "xargs -L 1",
    "xargs -L1",
    "xargs -l",
    "xargs -l1",
    "xargs --max-lines=1",
    "xargs -n 1",
    "xargs -n1",
    "xargs --max-args=1",
    "xargs --max-args 1",
    "xargs -P 1",
    "xargs -P1",
    "xargs --max-procs=1",
    "xargs --max-procs 1",
    "xargs -s 4096",
    "xargs -s4096",
    "xargs --max-chars=4096",
    "xargs --max-chars 4096",
    "xargs --process-slot-var=SLOT",
    "xargs --process-slot-var SLOT",
    "xargs --verbose",
    "xargs --no-run-if-empty",
    "xargs --null",
    "xargs --exit",
    "xargs -0 -n 1 -P 1",
    "xargs -0n1",
    "xargs -rn 1",
    "xargs --",
    "xargs -iP",
    "xargs -eP",
    "xargs -l1",
    "xargs -0l",
    "xargs -ri",
    "xargs --max-a 1",
    "xargs --max-a=1",
    "xargs --arg /dev/stdin",
    "xargs --del ,",
    "xargs --max-p 1",
    "xargs --max-c 4096",
    "xargs --proc SLOT",
    "xargs --no-run",
    "xargs -I{} -n1",
    "xargs -0 --",
    // sudo
    "sudo",
    "sudo -u root",
    "sudo -uroot",
    "sudo --user=root",
    "sudo --user root",
    "sudo -g root",
    "sudo -groot",
    "sudo --group=root",
    "sudo -E",
    "sudo -H",
    "sudo -n",
    "sudo -k",
    "sudo -S",
    "sudo -b",
    "sudo -D /",
    "sudo -D/",
    "sudo --chdir=/",
    "sudo --chdir /",
    "sudo -C 3",
    "sudo -C3",
    "sudo --close-from=3",
    "sudo -T 10",
    "sudo --command-timeout=10",
    "sudo -p prompt",
    "sudo -pprompt",
    "sudo --prompt=prompt",
    "sudo -R /",
    "sudo --chroot=/",
    "sudo -r role",
    "sudo --role role",
    "sudo -t type",
    "sudo --type=type",
    "sudo --preserve-env",
    "sudo --preserve-env=PATH",
    "sudo -nEu root",
    "sudo -Eu root",
    "sudo -Euroot",
    "sudo -nE -u root -g root",
    "sudo --",
    "sudo -u root --",
    "sudo --us root",
    "sudo --us=root",
    "sudo --gr root",
    "sudo --pre",
    "sudo --preserve-env=A,B",
    "sudo -a type",
    "sudo -c class",
    "sudo -U root",
    "sudo --other-user root",
    "sudo -hhost",
    "sudo --host host",
    "sudo -iu root",
    "sudo -su root",
    // sudo sets the variables among its options: every word holding a `=`, not starting `/`
    "sudo A=1",
    "sudo -u root A=1 -n a-b=2 =x",
    // doas
    "doas",
    "doas -u root",
    "doas -uroot",
    "doas -n",
    "doas -nu root",
    "doas -a style",
    "doas -astyle",
    "doas --",
    // nice
    "nice",
    "nice -n 5",
    "nice -n5",
    "nice -5",
    "nice --adjustment=5",
    "nice --adjustment 5",
    "nice -n -5",
    "nice -n-5",
    "nice --",
    "nice --adj 5",
    "nice --adj=5",
    // timeout
    "timeout 5",
    "timeout 5s",
    "timeout 0.5m",
    "timeout -s KILL 5",
    "timeout -sKILL 5",
    "timeout --signal=KILL 5",
    "timeout --signal KILL 5",
    "timeout -k 1 5",
    "timeout -k1 5",
    "timeout --kill-after=1 5",
    "timeout --kill-after 1 5",
    "timeout --preserve-status 5",
    "timeout --foreground 5",
    "timeout -v 5",
    "timeout --verbose 5",
    "timeout -vk 1 5",
    "timeout -vsKILL 5",
    "timeout -- 5",
    "timeout --sig KILL 5",
    "timeout --sig=KILL 5",
    "timeout --k 1 5",
    "timeout --pre --fore 5",
    // nohup, command, exec, setsid, stdbuf, ionice, time, busybox
    "nohup",
    // wrappers named by a glob (bash expands them in the working directory)
    "e?v",
    "e*v A=1",
    "n?hup",
    "x?rgs -n1",
    "[e]nv --",
    "nohup --",
    "command",
    "command -p",
    "command --",
    "exec",
    "exec -a name",
    "exec -aname",
    "exec -c",
    "exec -l",
    "exec -cl",
    "exec -cla name",
    "exec --",
    "setsid -w",
    "setsid --wait",
    "setsid -f -w",
    "setsid",
    "stdbuf -o0",
    "stdbuf -o 0",
    "stdbuf -oL",
    "stdbuf --output=L",
    "stdbuf --output L",
    "stdbuf -i0 -e0",
    "stdbuf -eL --",
    "stdbuf --out L",
    "stdbuf --in=0",
    "ionice -c 3",
    "ionice -c3",
    "ionice --class 3",
    "ionice --class=3",
    "ionice -c 2 -n 7",
    "ionice -c2 -n7",
    "ionice -t -c 3",
    "ionice -tc3",
    "ionice --classd 7 -c2",
    "time",
    "time -p",
    "/usr/bin/time -f %e",
    "/usr/bin/time -f%e",
    "/usr/bin/time --format=%e",
    "/usr/bin/time --format %e",
    "/usr/bin/time -o /dev/null",
    "/usr/bin/time -o/dev/null",
    "/usr/bin/time --output=/dev/null",
    "/usr/bin/time -a -o /dev/null",
    "/usr/bin/time -ao /dev/null",
    "/usr/bin/time -p",
    "/usr/bin/time -q",
    "/usr/bin/time --",
    "/usr/bin/time --form %e",
    "/usr/bin/time --out /dev/null",
    "busybox",
    "doas -C /etc/doas.conf",
    "doas -C/etc/doas.conf",
    "doas -L -s",
];

/// Prefix assignments.
pub const ASSIGNS: &[&str] = &[
    "FOO=1",
    "FOO=1 BAR='a b'",
    "a[1]=x",
    // Values bash takes as written that the grammar once read otherwise.
    "a=$",
    "b=#[",
    "c={$",
    "d=\\ ",
];

/// Redirections put between a simple command's first word and the rest.
pub const BETWEEN: &[&str] = &[
    ">/dev/null",
    "2>&1",
    ">&2",
    "&>/dev/null",
    "<<<x",
    "2>/dev/null",
];

/// `find` actions running a simple command.
pub const TEMPLATES: &[&str] = &[
    "find . -maxdepth 0 -exec {} \\;",
    "find . -maxdepth 0 -exec {} ';'",
    "find . -maxdepth 0 -execdir {} \\;",
    "find . -maxdepth 0 -exec {} {} +",
    "find . -maxdepth 0 -execdir {} {} +",
    "find . -maxdepth 0 -ok {} \\;",
    "find . -maxdepth 0 -okdir {} \\;",
];

/// Shells running a single-quoted script.
pub const SHELL_SINGLE: &[&str] = &[
    "bash -c {}",
    "sh -c {}",
    "dash -c {}",
    "bash -ec {}",
    "bash -lc {}",
    "bash -xc {}",
    "bash -cx {}",
    "bash --norc -c {}",
    "bash --noprofile --norc -c {}",
    "bash -o pipefail -c {}",
    "bash -co pipefail {}",
    "bash -O extglob -c {}",
    "bash +o history -c {}",
    "bash -c -- {}",
    "bash -c {} name",
    "bash -c {} name a b",
    "trap {} EXIT",
    "trap -- {} EXIT",
    "sh -ec {}",
    "zsh -c {}",
    "ksh -c {}",
    "eval {}",
];

/// Shells running a double-quoted script.
pub const SHELL_DOUBLE: &[&str] = &["sh -c {}", "bash -c {}", "eval {}"];

/// `env -S`: env splits the string itself (its own quotes).
pub const ENV_SPLIT: &[&str] = &[
    "env -S {}",
    "env -S{}",
    "env --split-string={}",
    "env -iS {}",
];

/// Compound contexts.
pub const CONTEXTS: &[&str] = &[
    "( {} )",
    "{ {}; }",
    "echo $({})",
    "echo \"$({})\"",
    "x=$({})",
    "cat <({})",
    "{} | cat",
    "echo x | {}",
    "true; {}",
    "true && {}",
    "false || {}",
    "true\n{}",
    "{} & wait",
    "! {}",
    "if true; then {}; fi",
    "if {}; then :; fi",
    "while {}; do break; done",
    "until ! {}; do break; done",
    "for i in 1; do {}; done",
    "case x in x) {};; esac",
    "f() { {}; }; f",
    "{} 2>/dev/null",
    "{} >/dev/null 2>&1",
    "{} <<< x",
    "time {}",
    "time -p {}",
    "time -- {}",
    "time -p -- {}",
    "coproc {}; wait",
    "coproc { {}; }; wait",
    "coproc n { {}; }; wait",
    "coproc ( {} ); wait",
    "coproc n ( {} ); wait",
    ": <<E\n $({})\nE",
    ": <<-E\n\t`{}` x\nE",
    "echo ${a:-$({})}",
    "echo `( {} )`",
    "echo \"${a:-`{}`}\"",
    "{} # rm -rf",
    "echo `{}`",
];

/// Put `layer` around `line`; `None` when it does not apply (a form the line cannot take).
pub fn apply(layer: Layer, line: &Line) -> Option<Line> {
    let simple_only = |f: &dyn Fn(&str) -> String| -> Option<Line> {
        let inner = if line.simple {
            line.text.clone()
        } else {
            // A wrapper runs one command: a compound line goes through a shell first.
            format!("bash -c {}", sq(&line.text))
        };
        Some(Line {
            text: f(&inner),
            simple: true,
            unjudgeable: line.unjudgeable,
        })
    };
    match layer {
        Layer::Prefix(p) => {
            // A wrapper named by a glob is expanded when the line runs: not judgeable.
            let glob = p
                .split(' ')
                .next()
                .is_some_and(|w| w.contains(['?', '*', '[']));
            simple_only(&|inner| format!("{p} {inner}")).map(|l| Line {
                unjudgeable: l.unjudgeable || glob,
                ..l
            })
        }
        Layer::Assign(a) => {
            simple_only(&|inner| format!("{a} {inner}")).map(|l| Line { simple: false, ..l })
        }
        Layer::Template(t) => simple_only(&|inner| t.replacen("{}", inner, 1)),
        Layer::Between(r) => {
            // Only where the first word is plain to see: no quote, substitution or brace
            // group runs past its first blank.
            let (first, rest) = line.text.split_once(' ')?;
            // After a reserved word a redirection starts the command: `time >f -p x` runs `-p`.
            let reserved = matches!(first, "time" | "!" | "coproc");
            let whole = !reserved
                && first.matches(['\'', '"']).count() % 2 == 0
                && !first.ends_with('\\')
                && !first.contains(['`', '(', '{', '\n']);
            (line.simple && whole).then(|| Line {
                text: format!("{first} {r} {rest}"),
                simple: true,
                unjudgeable: line.unjudgeable,
            })
        }
        Layer::ShellSingle(t) => Some(Line {
            text: t.replace("{}", &sq(&line.text)),
            simple: true,
            unjudgeable: line.unjudgeable || t.starts_with("eval"),
        }),
        Layer::ShellDouble(t) => Some(Line {
            text: t.replace("{}", &dq(&line.text)),
            simple: true,
            unjudgeable: line.unjudgeable || t.starts_with("eval"),
        }),
        Layer::EnvSplit(t) => {
            // env -S knows quotes and a few backslash escapes, not `$'…'`, substitutions or
            // operators: only a plain simple line, quoted as one word for bash.
            let plain = line.simple
                && !line.text.contains([
                    '$', '\\', '`', '\n', ';', '|', '&', '(', ')', '<', '>', '{', '[',
                ])
                && !line.text.contains('*')
                && !line.text.contains('?');
            plain.then(|| Line {
                text: t.replace("{}", &sq(&line.text)),
                simple: true,
                unjudgeable: line.unjudgeable,
            })
        }
        Layer::Context(c) => {
            if c.contains('`') && line.text.contains(['`', '\\']) {
                return None;
            }
            // `$((` would start an arithmetic expansion.
            if c.contains("$({}") && line.text.starts_with('(') {
                return None;
            }
            // Bash reads no `!`, `coproc` or function definition as `coproc`'s command, and no
            // `!` after a pipe (syntax errors).
            let starts = |w: &[&str]| w.iter().any(|w| line.text.starts_with(w));
            if c.starts_with("coproc {}") && starts(&["! ", "coproc ", "f()"])
                || c.ends_with("| {}") && starts(&["! "])
            {
                return None;
            }
            // A comment runs to the end of the line: nothing may follow it.
            if line.text.contains(" # ") {
                return None;
            }
            // A here-document's delimiter ends its line: nothing may follow it either.
            if line.text.ends_with("\nE") && !c.ends_with("{}") {
                return None;
            }
            Some(Line {
                text: c.replace("{}", &line.text),
                simple: false,
                unjudgeable: line.unjudgeable,
            })
        }
    }
}

/// Every layer, in a fixed order (quickcheck picks indices).
pub fn all_layers() -> Vec<Layer> {
    let mut v: Vec<Layer> = PREFIXES.iter().map(|p| Layer::Prefix(p)).collect();
    v.extend(TEMPLATES.iter().map(|t| Layer::Template(t)));
    v.extend(SHELL_SINGLE.iter().map(|t| Layer::ShellSingle(t)));
    v.extend(SHELL_DOUBLE.iter().map(|t| Layer::ShellDouble(t)));
    v.extend(ENV_SPLIT.iter().map(|t| Layer::EnvSplit(t)));
    v.extend(CONTEXTS.iter().map(|c| Layer::Context(c)));
    v.extend(ASSIGNS.iter().map(|a| Layer::Assign(a)));
    v.extend(BETWEEN.iter().map(|r| Layer::Between(r)));
    v
}

/// A base command: its program and its arguments (each already one shell word).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub program: &'static str,
    pub args: Vec<String>,
}

impl Base {
    pub fn line(&self, spelling: Spelling, dir: &str) -> Line {
        let mut text = spell(self.program, spelling, dir);
        for a in &self.args {
            text.push(' ');
            text.push_str(a);
        }
        Line {
            text,
            simple: true,
            unjudgeable: spelling.is_glob(),
        }
    }
}

/// One generated case: a base, the spelling of its program, and the layers (innermost first).
#[derive(Debug, Clone)]
pub struct Case {
    pub base: usize,
    pub spelling: Spelling,
    pub layers: Vec<usize>,
}

impl Case {
    /// The line, or `None` when a layer did not apply.
    pub fn render(&self, bases: &[Base], layers: &[Layer], dir: &str) -> Option<Line> {
        let mut line = bases[self.base % bases.len()].line(self.spelling, dir);
        for &l in &self.layers {
            line = apply(layers[l % layers.len()], &line)?;
        }
        Some(line)
    }
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Case {
        let n = usize::arbitrary(g) % 4;
        Case {
            base: usize::arbitrary(g),
            spelling: *g.choose(&Spelling::ALL).unwrap_or(&Spelling::Plain),
            layers: (0..n).map(|_| usize::arbitrary(g)).collect(),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Case>> {
        let me = self.clone();
        let fewer = self.layers.clone().shrink().map({
            let me = me.clone();
            move |layers| Case {
                layers,
                ..me.clone()
            }
        });
        let plain = (self.spelling != Spelling::Plain).then_some(Case {
            spelling: Spelling::Plain,
            ..me
        });
        Box::new(plain.into_iter().chain(fewer))
    }
}

/// The `-r -f` flag spellings of `rm` (each must count as both flags).
pub const RM_FLAGS: &[&str] = &[
    "-rf",
    "-fr",
    "-r -f",
    "-f -r",
    "-R -f",
    "-Rf",
    "-fR",
    "--recursive --force",
    "--force --recursive",
    "-r --force",
    "--recursive -f",
    "-rfv",
    "-v -rf",
    "-rf -v",
    "-r -i -f",
];

/// Operand lists (a glob among them: a rule's `*` matches a `*` in the text like any other
/// character).
pub const OPERANDS: &[&str] = &[
    "x",
    "/",
    "build dist",
    "'a b'",
    "\"$HOME\"",
    "-- -x",
    "",
    "*.o /",
    "'*x'",
    "\\*",
];

/// Run `prop` over `n` random cases (`None`: the case does not apply and is not counted); on a
/// failure, shrink it greedily and panic with the smallest failing case and `describe` of it.
/// Returns how many cases applied (at most `n`; tries stop after `20 n`). (quickcheck's own
/// runner takes only function pointers; these properties need state.)
pub fn check_random(
    n: u64,
    mut prop: impl FnMut(&Case) -> Option<bool>,
    describe: impl Fn(&Case) -> String,
) -> u64 {
    let mut g = Gen::new(64);
    let (mut tested, mut tries) = (0u64, 0u64);
    while tested < n && tries < n * 20 {
        tries += 1;
        let case = Case::arbitrary(&mut g);
        match prop(&case) {
            None => continue,
            Some(true) => tested += 1,
            Some(false) => {
                let mut smallest = case;
                'shrinking: loop {
                    for smaller in smallest.shrink() {
                        if prop(&smaller) == Some(false) {
                            smallest = smaller;
                            continue 'shrinking;
                        }
                    }
                    break;
                }
                panic!(
                    "property failed after {tested} passing cases; smallest failing case \
                     {smallest:?}:\n{}",
                    describe(&smallest)
                );
            }
        }
    }
    tested
}

/// The number of random cases a property runs (`OPENMAX_PROPERTY_CASES` overrides).
pub fn cases(default: u64) -> u64 {
    std::env::var("OPENMAX_PROPERTY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

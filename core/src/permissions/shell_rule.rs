//! Matching a `shell(…)` rule's pattern against one command the line runs.
//!
//! The pattern is split into words like a command (`'…'` and `"…"` group, quotes removed); its
//! program is normalised like a command's (`/bin/rm` is `rm`). A command matches when either
//! - structurally: the program matches the pattern's program (a glob), every flag the pattern
//!   names is among the command's flags, and the pattern's other words, joined by spaces, match
//!   the command's operands joined by spaces (a glob); or
//! - textually: the whole pattern (program normalised) matches the command's program and
//!   arguments joined by single spaces (the plain glob of earlier versions).
//!
//! In both, a last pattern word `*` also matches nothing (`rm -rf *` matches `rm -rf`).
//!
//! A command whose name was a glob ([`Command::pattern`]) matches structurally only, when its
//! pattern matches the rule's program (a literal name): `r? -rf x` may run `rm -rf x`.
//!
//! Flags are canonical: a short cluster is its letters (`-rf`, `-fr` and `-r -f` are `{r, f}`),
//! a long flag its name (`--force=x` keeps `force=x`), anywhere before `--`; a few well-known
//! spellings are folded per program ([`alias`]: `rm -R` and `rm --recursive` are `r`, `--force`
//! is `f`). A pattern word holding a glob character is never a flag.

use std::collections::BTreeSet;

use super::glob_match;
use super::unwrap::Command;

/// A pattern, split.
struct Pattern {
    program: String,
    flags: BTreeSet<String>,
    operands: String,
    text: String,
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// Split a pattern into words: whitespace separates, quotes group and are removed.
fn words(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for c in pattern.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

fn normalise_program(p: &str) -> String {
    match p.rsplit('/').next() {
        Some(last) if !last.is_empty() => last.to_string(),
        _ => p.to_string(),
    }
}

/// A flag's canonical name for `program`.
pub fn alias(program: &str, flag: &str) -> String {
    let folded = match (program, flag) {
        ("rm" | "cp" | "scp" | "rsync", "R" | "recursive") => "r",
        ("rm" | "cp" | "mv" | "ln" | "git", "force") => "f",
        ("chmod" | "chown" | "chgrp", "recursive") => "R",
        ("rm", "dir") => "d",
        _ => flag,
    };
    folded.to_string()
}

/// Canonical flags and the operands of `args` (the rule side never treats a glob as a flag).
fn split_args<'a>(
    program: &str,
    args: impl Iterator<Item = &'a str>,
    rule: bool,
) -> (BTreeSet<String>, Vec<&'a str>) {
    let mut flags = BTreeSet::new();
    let mut operands = Vec::new();
    let mut after_dashdash = false;
    for a in args {
        if after_dashdash || (rule && has_glob(a)) {
            operands.push(a);
        } else if a == "--" {
            after_dashdash = true;
        } else if let Some(long) = a.strip_prefix("--") {
            flags.insert(alias(program, long));
        } else if a.len() > 1 && a.starts_with('-') {
            for c in a[1..].chars() {
                flags.insert(alias(program, &c.to_string()));
            }
        } else {
            operands.push(a);
        }
    }
    (flags, operands)
}

impl Pattern {
    fn parse(pattern: &str) -> Option<Pattern> {
        let w = words(pattern);
        let (first, rest) = w.split_first()?;
        let program = normalise_program(first);
        let (flags, operands) = split_args(&program, rest.iter().map(String::as_str), true);
        let mut text = program.clone();
        for r in rest {
            text.push(' ');
            text.push_str(r);
        }
        Some(Pattern {
            operands: operands.join(" "),
            program,
            flags,
            text,
        })
    }
}

/// Whether the rule pattern matches the command.
pub fn matches(pattern: &str, cmd: &Command) -> bool {
    let Some(p) = Pattern::parse(pattern) else {
        return false;
    };
    if cmd.pattern {
        // A command name written as a glob names every program it matches: a rule naming one
        // of them (a literal program) judges it by its arguments.
        if has_glob(&p.program) || !super::pattern::matches(&cmd.program, &p.program) {
            return false;
        }
    } else {
        if glob_words(&p.text, &cmd.text()) {
            return true;
        }
        if !glob_match(&p.program, &cmd.program) {
            return false;
        }
    }
    // A pattern's flags are read as the rule's program reads them.
    let program = if cmd.pattern {
        &p.program
    } else {
        &cmd.program
    };
    let (flags, operands) = split_args(program, cmd.args.iter().map(String::as_str), false);
    p.flags.is_subset(&flags) && glob_words(&p.operands, &operands.join(" "))
}

/// A glob over space-joined words, where a last word `*` also matches no word at all
/// (`git push *` matches `git push`).
fn glob_words(pattern: &str, text: &str) -> bool {
    glob_match(pattern, text)
        || pattern
            .strip_suffix(" *")
            .is_some_and(|head| glob_match(head, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Command {
        let mut w = s.split(' ').map(str::to_string);
        Command {
            program: w.next().unwrap(),
            args: w.collect(),
            pattern: false,
        }
    }

    #[test]
    fn flags_are_canonical() {
        for c in [
            "rm -rf x",
            "rm -fr x",
            "rm -r -f x",
            "rm -Rf x",
            "rm --recursive --force x",
            "rm -f x -r",
            "rm -rfv x",
            "rm -rf -- -x",
            "rm -rf",
        ] {
            assert!(matches("rm -rf *", &cmd(c)), "{c}");
            assert!(matches("/bin/rm -fr *", &cmd(c)), "{c}");
        }
        for c in ["rm -r x", "rm x", "rmdir -rf x", "grep -rf x", "rm -- -rf"] {
            assert!(!matches("rm -rf *", &cmd(c)), "{c}");
        }
        // A program is its path's last component, and one ending in `/` is kept as written,
        // as the command side keeps it: never the empty name of `'' -rf x`.
        assert!(matches("bin/ -rf *", &cmd("bin/ -rf x")));
        assert!(!matches("bin/ -rf *", &cmd(" -rf x")));
    }

    /// Every row of [`alias`]: for each program it names, the long spelling is the short one
    /// both ways (a rule in either spelling matches a command in the other). The near misses:
    /// the same spelling for a program the row leaves out, and a short flag that means
    /// something else there (`chmod -r` takes read permission away, `ls -r` reverses).
    #[test]
    fn every_alias_folds_both_ways_for_its_programs_only() {
        let rows: [(&[&str], &str, &str); 6] = [
            (&["rm", "cp", "scp", "rsync"], "--recursive", "-r"),
            (&["rm", "cp", "scp", "rsync"], "-R", "-r"),
            (&["rm", "cp", "mv", "ln", "git"], "--force", "-f"),
            (&["chmod", "chown", "chgrp"], "--recursive", "-R"),
            (&["rm"], "--dir", "-d"),
            (&["rm", "cp"], "--recursive --force", "-rf"),
        ];
        for (programs, long, short) in rows {
            for p in programs {
                let (l, s) = (format!("{p} {long} x"), format!("{p} {short} x"));
                assert!(matches(&format!("{p} {short} *"), &cmd(&l)), "{l}");
                assert!(matches(&format!("{p} {long} *"), &cmd(&s)), "{s}");
            }
        }
        for (rule, c) in [
            ("ls -r *", "ls --recursive x"),
            ("chmod -R *", "chmod -r x"),
            ("chmod -r *", "chmod --recursive x"),
            ("mv -r *", "mv --recursive x"),
            ("grep -f *", "grep --force x"),
            ("cp -d *", "cp --dir x"),
        ] {
            assert!(!matches(rule, &cmd(c)), "{rule} matched {c}");
        }
    }

    #[test]
    fn plain_globs_still_work() {
        assert!(matches("git push*", &cmd("git push origin main")));
        assert!(matches("git push*", &cmd("git push --force")));
        assert!(matches("git push --force *", &cmd("git push -f origin")));
        assert!(matches(
            "git push --force *",
            &cmd("git push origin --force")
        ));
        assert!(matches("git push --force *", &cmd("git push -f")));
        assert!(!matches("git push --force *", &cmd("git push origin")));
        assert!(matches("git commit -m*", &cmd("git commit -mfix")));
        assert!(!matches("git push*", &cmd("git pull")));
        assert!(matches("*curl*", &cmd("curl -s x")));
        assert!(matches("cargo test", &cmd("cargo test")));
        assert!(!matches("cargo test", &cmd("cargo test --release x")));
        assert!(matches("echo 'a b'", &cmd("echo a b")));
        assert!(!matches("", &cmd("ls")));
    }

    /// A lone `-` (standard input, the previous branch) is an operand, in a rule and in a
    /// command alike, never a flag and never dropped.
    #[test]
    fn a_lone_dash_is_an_operand() {
        assert!(matches("git checkout -", &cmd("git checkout -q -")));
        assert!(!matches("git checkout -", &cmd("git checkout -q")));
        assert!(matches("cat -n *", &cmd("cat - -n")));
        assert!(!matches("cat -n", &cmd("cat - -n")));
    }

    #[test]
    fn a_globbed_program_is_judged_by_the_rules_of_the_programs_it_names() {
        let globbed = |s: &str| Command {
            pattern: true,
            ..cmd(s)
        };
        // `r* -rf x` may run `rm`: a rule on `rm` judges it by its arguments.
        assert!(matches("rm -rf *", &globbed("r* -rf x")));
        assert!(!matches("rm -i *", &globbed("r* -rf x")));
        // It cannot run `ls`: a rule on `ls`, however wide, says nothing of it.
        assert!(!matches("ls *", &globbed("r* -rf x")));
        // A rule whose own program is a glob is not compared with a glob.
        assert!(!matches("r? *", &globbed("r* -rf x")));
    }
}

//! Properties of `shell(…)` permission rules over generated command lines: a command a rule
//! denies stays denied, and one it asks about is still asked about (or denied), however its
//! program is spelled (quotes, backslashes, `$'…'`, paths, globs, braces) and whatever it is
//! wrapped in (every wrapper the parser knows, with each of its option forms; nested shells,
//! `eval`, substitutions, subshells, groups, lists, pipelines); and near misses (`rmdir`,
//! `echo rm -rf`, `git rm -rf`, a missing flag) are never denied nor asked about, however
//! they are wrapped, so the matcher cannot pass by judging everything.
//!
//! The same generator drives `shell_rules_bash.rs`, which runs the lines with the real bash.

mod common;

use common::shell_gen::{
    all_layers, cases, check_random, Base, Case, Spelling, OPERANDS, RM_FLAGS,
};
use openmax_core::permissions::{Permissions, Rule, SHELL_TOOL};

/// How a line is judged, from the most permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    Allow,
    Ask,
    Deny,
}

fn rules() -> Permissions {
    let parse = |r: &[&str]| r.iter().map(|r| Rule::parse(r).unwrap()).collect();
    Permissions {
        deny: parse(&["shell(rm -rf *)", "shell(git push --force *)"]),
        ask: parse(&["shell(curl *)", "shell(git push*)"]),
    }
}

fn verdict(p: &Permissions, line: &str) -> Verdict {
    let t = [line.to_string()];
    if p.denied_by(SHELL_TOOL, &t).is_some() {
        Verdict::Deny
    } else if p.ask_by(SHELL_TOOL, &t).is_some() {
        Verdict::Ask
    } else {
        Verdict::Allow
    }
}

/// Commands the rules deny: every flag spelling of `rm -rf` with every operand list, and
/// forced pushes.
fn denied_bases() -> Vec<Base> {
    let mut v = Vec::new();
    for flags in RM_FLAGS {
        for ops in OPERANDS {
            let mut args: Vec<String> = flags.split(' ').map(str::to_string).collect();
            args.extend(ops.split(' ').filter(|s| !s.is_empty()).map(str::to_string));
            v.push(Base {
                program: "rm",
                args,
            });
        }
    }
    for args in [
        "push --force origin main",
        "push -f origin",
        "push origin --force",
        "push --force",
        "push -f",
    ] {
        v.push(Base {
            program: "git",
            args: args.split(' ').map(str::to_string).collect(),
        });
    }
    v
}

/// Commands the rules ask about (and deny none of).
fn asked_bases() -> Vec<Base> {
    [
        ("curl", "-s https://example.com"),
        ("curl", "https://example.com -o out"),
        ("curl", ""),
        ("git", "push origin main"),
        ("git", "push"),
        ("git", "push --tags"),
    ]
    .iter()
    .map(|(p, a)| Base {
        program: p,
        args: a
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    })
    .collect()
}

/// Near misses: commands no rule names. Their program is never spelled as a glob (a glob
/// such as `r*` may well name `rm`).
fn near_miss_bases() -> Vec<Base> {
    [
        ("rmdir", "x"),
        ("rmdir", "-rf x"),
        ("rm", "-r x"),
        ("rm", "-f x"),
        ("rm", "x"),
        ("rm", "-i -v x"),
        ("rm", "-- -rf"),
        ("rm", "./-rf"),
        ("echo", "rm -rf x"),
        ("echo", "'rm -rf x'"),
        ("printf", "'%s\\n' rm -rf /"),
        ("grep", "-rf rm x"),
        ("grep", "-r 'rm -rf' ."),
        ("git", "rm -rf x"),
        ("git", "stash push --force"),
        ("echo", "r? -rf x"),
        ("echo", "[r]m -rf x"),
        ("echo", "{rm,} -rf x"),
        ("ls", "{a,b} r[a-z]"),
        ("git", "pull --force"),
        ("git", "fetch --force origin"),
        ("git", "status"),
        ("ls", "-rf"),
        ("cat", "rm"),
        ("man", "rm"),
        ("which", "rm curl"),
        ("trm", "-rf x"),
        ("rmx", "-rf x"),
        ("wget", "https://example.com"),
        ("echo", "curl https://example.com"),
        ("echo", "git push --force"),
    ]
    .iter()
    .map(|(p, a)| Base {
        program: p,
        args: a
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    })
    .collect()
}

const DIR: &str = "/usr/bin";

/// Check `want(verdict, unjudgeable)` over random cases built from `bases`.
fn property(bases: Vec<Base>, skip_expanding: bool, want: impl Fn(Verdict, bool) -> bool) {
    let (p, layers) = (rules(), all_layers());
    let line = |case: &Case| {
        if skip_expanding && case.spelling.expands() {
            return None;
        }
        case.render(&bases, &layers, DIR)
    };
    let n = cases(3000);
    let tested = check_random(
        n,
        |case| line(case).map(|l| want(verdict(&p, &l.text), l.unjudgeable)),
        |case| {
            line(case)
                .map(|l| format!("judged {:?}: {:?}", verdict(&p, &l.text), l.text))
                .unwrap_or_default()
        },
    );
    assert!(tested > n / 2, "only {tested} of {n} cases applied");
}

#[test]
fn a_denied_command_stays_denied_however_spelled_and_wrapped() {
    property(denied_bases(), false, |v, _| v == Verdict::Deny);
}

#[test]
fn an_asked_command_is_still_asked_however_spelled_and_wrapped() {
    property(asked_bases(), false, |v, _| v >= Verdict::Ask);
}

#[test]
fn a_near_miss_is_neither_denied_nor_asked_however_wrapped() {
    // What cannot be judged statically (`eval`) is asked about by design, never denied.
    property(near_miss_bases(), true, |v, unjudgeable| {
        v == Verdict::Allow || (v == Verdict::Ask && unjudgeable)
    });
}

/// Every spelling and every layer alone, exhaustively (the random runs compose them).
#[test]
fn every_spelling_and_every_layer_alone() {
    let p = rules();
    let layers = all_layers();
    let mut failures = Vec::new();
    let check = |bases: &[Base], want: &dyn Fn(Verdict, bool) -> bool, glob_ok: bool| {
        let mut bad = Vec::new();
        for (b, _) in bases.iter().enumerate() {
            for s in Spelling::ALL {
                if s.expands() && !glob_ok {
                    continue;
                }
                for l in std::iter::once(None).chain((0..layers.len()).map(Some)) {
                    let case = Case {
                        base: b,
                        spelling: s,
                        layers: l.into_iter().collect(),
                    };
                    let Some(line) = case.render(bases, &layers, DIR) else {
                        continue;
                    };
                    let v = verdict(&p, &line.text);
                    if !want(v, line.unjudgeable) {
                        bad.push(format!("{v:?}: {:?}", line.text));
                    }
                }
            }
        }
        bad
    };
    let first = |v: Vec<Base>| v.into_iter().step_by(7).collect::<Vec<_>>();
    failures.extend(check(
        &first(denied_bases()),
        &|v, _| v == Verdict::Deny,
        true,
    ));
    failures.extend(check(&asked_bases(), &|v, _| v >= Verdict::Ask, true));
    failures.extend(check(
        &near_miss_bases(),
        &|v, unjudgeable| v == Verdict::Allow || (v == Verdict::Ask && unjudgeable),
        false,
    ));
    assert!(
        failures.is_empty(),
        "{} lines judged wrongly, for instance:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

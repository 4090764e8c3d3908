//! Permission rules: `Tool` or `Tool(glob)` in `deny` and `ask` lists.
//!
//! A rule with no glob matches every call of the tool; with a glob it matches when any of the
//! call's targets (see [`crate::tool::ToolPlan::targets`]) matches. The glob language is `*`
//! (any run of characters, `/` included), `?` (one character) and literal text; it is matched
//! against the whole target.
//!
//! For the [`SHELL_TOOL`], each target is a command line and rules judge what it runs: the
//! line is parsed as bash ([`bash`]), wrappers and nested shells are seen through
//! ([`unwrap`]), and each program run is matched with canonical flags ([`shell_rule`]). A line
//! with a part that cannot be judged statically matches every `ask` rule of the tool (never a
//! `deny` rule by that alone). Deny rules are a guard rail against mistakes; the sandbox is the
//! boundary.

pub mod bash;
pub mod lex;
pub mod pattern;
pub mod shell_rule;
pub mod unwrap;
pub mod wrappers;

use serde::{Deserialize, Serialize};

/// The built-in tool whose targets are command lines.
pub const SHELL_TOOL: &str = "shell";

/// One parsed rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rule {
    /// The tool the rule applies to.
    pub tool: String,
    /// The argument pattern (a command glob for `shell`, a path glob for file tools); `None`
    /// matches every call.
    pub pattern: Option<String>,
}

impl Rule {
    /// Parse `Tool` or `Tool(glob)`.
    pub fn parse(s: &str) -> Result<Rule, String> {
        let s = s.trim();
        match s.find('(') {
            None => {
                if s.is_empty() || s.contains(')') {
                    return Err(format!(
                        "bad permission rule {s:?}: expected Tool or Tool(glob)"
                    ));
                }
                Ok(Rule {
                    tool: s.to_string(),
                    pattern: None,
                })
            }
            Some(open) => {
                if !s.ends_with(')') || open == 0 {
                    return Err(format!(
                        "bad permission rule {s:?}: expected Tool or Tool(glob)"
                    ));
                }
                Ok(Rule {
                    tool: s[..open].trim().to_string(),
                    pattern: Some(s[open + 1..s.len() - 1].to_string()),
                })
            }
        }
    }

    /// Whether the rule matches a call of `tool` with these targets (for the shell tool, what
    /// the command lines run; unjudgeable parts do not count here, see [`Permissions::ask_by`]).
    pub fn matches(&self, tool: &str, targets: &[String]) -> bool {
        if tool == SHELL_TOOL {
            return self.matches_shell(&analyse_all(targets));
        }
        // The tool part is itself a glob, so `mcp__everything__*` covers every tool of one MCP
        // server.
        if !glob_match(&self.tool, tool) {
            return false;
        }
        match &self.pattern {
            None => true,
            Some(p) => targets.iter().any(|t| glob_match(p, t)),
        }
    }

    fn matches_shell(&self, lines: &[unwrap::Analysis]) -> bool {
        if self.tool != SHELL_TOOL {
            return false;
        }
        // A line too big to read may run anything: every rule of the tool matches.
        match &self.pattern {
            None => true,
            Some(_) if lines.iter().any(|a| a.too_big) => true,
            Some(p) => lines
                .iter()
                .flat_map(|a| &a.commands)
                .any(|c| shell_rule::matches(p, c)),
        }
    }
}

fn analyse_all(targets: &[String]) -> Vec<unwrap::Analysis> {
    targets.iter().map(|t| unwrap::analyse(t)).collect()
}

/// The layered `[permissions]` lists (user config first, then project).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permissions {
    /// Rules that refuse a call outright.
    pub deny: Vec<Rule>,
    /// Rules that put a call through the approval gate in `ask` mode.
    pub ask: Vec<Rule>,
}

impl Permissions {
    /// The first deny rule matching the call.
    pub fn denied_by(&self, tool: &str, targets: &[String]) -> Option<&Rule> {
        if tool == SHELL_TOOL && self.deny.iter().any(|r| r.tool == SHELL_TOOL) {
            let lines = analyse_all(targets);
            return self.deny.iter().find(|r| r.matches_shell(&lines));
        }
        self.deny.iter().find(|r| r.matches(tool, targets))
    }

    /// The first ask rule matching the call. For the shell tool, a command line with a part
    /// that cannot be judged statically matches the first `ask` rule of the tool.
    pub fn ask_by(&self, tool: &str, targets: &[String]) -> Option<&Rule> {
        if tool == SHELL_TOOL && self.ask.iter().any(|r| r.tool == SHELL_TOOL) {
            let lines = analyse_all(targets);
            if lines.iter().any(|a| !a.unjudgeable.is_empty()) {
                return self.ask.iter().find(|r| r.tool == SHELL_TOOL);
            }
            return self.ask.iter().find(|r| r.matches_shell(&lines));
        }
        self.ask.iter().find(|r| r.matches(tool, targets))
    }

    /// Why the shell tool's command lines cannot be fully judged (empty when they can).
    pub fn unjudgeable(targets: &[String]) -> Vec<String> {
        analyse_all(targets)
            .into_iter()
            .flat_map(|a| a.unjudgeable)
            .collect()
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pattern {
            None => write!(f, "{}", self.tool),
            Some(p) => write!(f, "{}({})", self.tool, p),
        }
    }
}

/// Match `text` against a glob of `*`, `?` and literals (iterative, linear backtracking).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        // A `*` in the pattern is a star even where the text holds a `*` too.
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches() {
        let r = Rule::parse("shell(rm -rf *)").unwrap();
        assert!(r.matches("shell", &["rm -rf /tmp/x".into()]));
        assert!(!r.matches("shell", &["ls".into()]));
        assert!(!r.matches("read_file", &["rm -rf x".into()]));
        let r = Rule::parse("read_file(.env)").unwrap();
        assert!(r.matches("read_file", &[".env".into()]));
        assert!(!r.matches("read_file", &["a/.env".into()]));
        assert!(Rule::parse("write_file")
            .unwrap()
            .matches("write_file", &[]));
        assert!(Rule::parse("(x)").is_err());
        assert!(Rule::parse("a(b").is_err());
        // A bare tool name with a stray parenthesis, or nothing at all, is no rule.
        for bad in ["", "   ", "shell)", "read_file)x", ")"] {
            assert!(Rule::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    /// Every tool's own rule applies whatever rules of other tools stand beside it: a list
    /// holding shell rules (whose commands are analysed) still matches another tool's rule, and
    /// the shell's rule still sees through a wrapper beside another tool's rule.
    #[test]
    fn a_rule_applies_beside_rules_of_other_tools() {
        let cases = [
            ("read_file(.env)", "read_file", ".env"),
            ("write_file(*.lock)", "write_file", "Cargo.lock"),
            ("mcp__github__*", "mcp__github__push", "x"),
            ("shell(rm -rf *)", SHELL_TOOL, "env rm -rf /"),
        ];
        let others = [
            "shell(git push *)",
            "read_file(secrets/*)",
            "edit_file(*.pem)",
        ];
        for (rule, tool, target) in cases {
            let targets = [target.to_string()];
            for extra in others
                .iter()
                .map(|o| vec![*o])
                .chain([vec![], others.to_vec()])
            {
                let mut list = extra.clone();
                list.push(rule);
                let deny = perms(&list, &[]);
                assert!(
                    deny.denied_by(tool, &targets).is_some(),
                    "deny {list:?}: {tool} {target}"
                );
                let ask = perms(&[], &list);
                assert!(
                    ask.ask_by(tool, &targets).is_some(),
                    "ask {list:?}: {tool} {target}"
                );
                // The control: without the rule, the others do not catch the call.
                let without = perms(&extra, &extra);
                assert!(
                    without.denied_by(tool, &targets).is_none(),
                    "{extra:?}: {tool}"
                );
                assert!(
                    without.ask_by(tool, &targets).is_none(),
                    "{extra:?}: {tool}"
                );
            }
        }
    }

    fn perms(deny: &[&str], ask: &[&str]) -> Permissions {
        Permissions {
            deny: deny.iter().map(|r| Rule::parse(r).unwrap()).collect(),
            ask: ask.iter().map(|r| Rule::parse(r).unwrap()).collect(),
        }
    }

    #[test]
    fn deny_sees_through_shell_syntax() {
        let p = perms(&["shell(rm -rf *)"], &[]);
        let denied = |line: &str| p.denied_by(SHELL_TOOL, &[line.to_string()]).is_some();
        for bypass in [
            "rm -rf x",
            "rm  -rf x",
            "rm -fr x",
            "rm -r -f x",
            "rm -Rf x",
            "rm --recursive --force x",
            "/bin/rm -rf x",
            "\\rm -rf x",
            "'rm' -rf x",
            "r\"\"m -rf x",
            "env rm -rf x",
            "command rm -rf x",
            "exec rm -rf x",
            "nice rm -rf x",
            "nohup rm -rf x",
            "timeout 5 rm -rf x",
            "time rm -rf x",
            "! rm -rf x",
            "FOO=1 rm -rf x",
            "rm -rf x > /dev/null 2>&1",
            "bash -c 'rm -rf x'",
            "sh -c \"rm -rf x\"",
            "echo $(rm -rf x)",
            "echo `rm -rf x`",
            "( rm -rf x )",
            "{ rm -rf x; }",
            "if true; then rm -rf x; fi",
            "while true; do rm -rf x; done",
            "for f in a b; do rm -rf $f; done",
            "f() { rm -rf x; }; f",
            "ls; rm -rf x",
            "ls && rm -rf x",
            "ls || rm -rf x",
            "ls | rm -rf x",
            "rm -rf x &",
            "sudo -u root env A=1 timeout -s KILL 5 /usr/bin/rm -rf x",
            "find . -exec rm -rf {} +",
            "echo x | xargs rm -rf",
            "eval 'rm -rf x'",
        ] {
            assert!(denied(bypass), "not denied: {bypass}");
        }
        for near_miss in [
            "echo 'rm -rf x'",
            "echo \"rm -rf x\"",
            "grep rm file",
            "grep -r 'rm -rf' .",
            "rm -r x",
            "rm x",
            "git rm -rf x",
            "ls # rm -rf x",
            "printf '%s' 'bash -c \"rm -rf x\"'",
        ] {
            assert!(!denied(near_miss), "denied: {near_miss}");
        }
    }

    /// A line whose substitutions nest deeper than any script, with more pipes than any, a
    /// word brace-expanding into more words than any, or a command with more wrappers than
    /// any, is not read past that bound and matches every `shell` rule, deny rules included;
    /// at the bound it is judged as any other. No nesting, of any construct, exhausts the
    /// stack (a test thread's is smaller than openmax's).
    #[test]
    fn a_line_too_big_to_read_matches_every_shell_rule() {
        let p = Permissions {
            deny: vec![Rule::parse("shell(rm -rf *)").unwrap()],
            ask: vec![Rule::parse("shell(git push*)").unwrap()],
        };
        let nested = |n: usize, inner: &str| format!("{}{inner}{}", "$(".repeat(n), ")".repeat(n));
        let at_bound = nested(lex::MAX_NESTING, "rm -rf x");
        assert!(p.denied_by(SHELL_TOOL, &[at_bound]).is_some());
        let ls_at_bound = nested(lex::MAX_NESTING, "ls");
        assert!(p.denied_by(SHELL_TOOL, &[ls_at_bound]).is_none());
        let quoted = format!("echo `{}`", nested(lex::MAX_NESTING - 1, "ls"));
        assert!(!unwrap::analyse(&quoted).too_big);
        // A line with as many pipes as are read, likewise; characters that are no pipe do not
        // count.
        let piped = |pipes: usize, inner: &str| format!("{}{inner}", "x | ".repeat(pipes));
        let at_bound = piped(lex::MAX_PIPES, "rm -rf x");
        assert!(p.denied_by(SHELL_TOOL, &[at_bound]).is_some());
        assert!(p
            .denied_by(SHELL_TOOL, &[piped(lex::MAX_PIPES, "ls")])
            .is_none());
        let n = 20_000;
        for no_pipes in [
            format!("{}ls", "x || ".repeat(n)),
            format!("echo '{}' \"{}\" \\|", "|".repeat(n), "|".repeat(n)),
            format!("cat <<E\n{}\nE\nls # {}", "|".repeat(n), "|".repeat(n)),
        ] {
            assert!(!unwrap::analyse(&no_pipes).too_big);
        }
        // A word giving as many words as are read, likewise.
        let words = format!("rm {{-rf,}}{} x", "{,}".repeat(7));
        assert!(p.denied_by(SHELL_TOOL, &[words]).is_some());
        for line in [
            "ls {1..256}".to_string(),
            "ls {a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}".to_string(),
            // As many expressions one inside another as are read (one-word sequences, the
            // only kind that does not double the words each time).
            format!("ls {}", "{a..a}".repeat(lex::MAX_WORDS)),
            "mkdir -p src/{a,b,c}/{d,e,f}; ".repeat(1_000),
        ] {
            assert!(!unwrap::analyse(&line).too_big, "{line}");
        }
        // As many wrappers as are read, likewise.
        let wrapped = |inner: &str| format!("{}{inner}", "env ".repeat(unwrap::MAX_WRAPPERS));
        assert!(p.denied_by(SHELL_TOOL, &[wrapped("rm -rf x")]).is_some());
        assert!(p.denied_by(SHELL_TOOL, &[wrapped("ls")]).is_none());
        let finds = |inner: &str| {
            let n = unwrap::MAX_WRAPPERS;
            format!("{}{inner}{}", "find . -exec ".repeat(n), " ;".repeat(n))
        };
        assert!(p.denied_by(SHELL_TOOL, &[finds("rm -rf x")]).is_some());
        assert!(p.denied_by(SHELL_TOOL, &[finds("ls")]).is_none());
        for line in [
            nested(lex::MAX_NESTING + 1, "ls"),
            nested(20_000, "ls"),
            format!("echo \"{}ls{}\"", "$(".repeat(20_000), ")".repeat(20_000)),
            format!("echo `{}`", nested(lex::MAX_NESTING + 1, "ls")),
            // A backquoted substitution is a level too.
            format!("echo `{}`", nested(lex::MAX_NESTING, "ls")),
            format!("echo {}1{}", "$((".repeat(20_000), "))".repeat(20_000)),
            format!("{}ls", "env ".repeat(unwrap::MAX_WRAPPERS + 1)),
            format!("{}ls", "nice timeout 5 ".repeat(20_000)),
            format!("{}ls{}", "find . -exec ".repeat(2_000), " ;".repeat(2_000)),
            piped(lex::MAX_PIPES + 1, "ls"),
            piped(20_000, "ls"),
            // Pipes count over the whole line: in every pipeline, substitution and script it
            // runs.
            format!("{}ls", "x |& ".repeat(lex::MAX_PIPES + 1)),
            format!("{}ls", "x | x; ".repeat(lex::MAX_PIPES + 1)),
            format!(
                "{}ls",
                "echo $(x | x) `x | x`; ".repeat(lex::MAX_PIPES / 2 + 1)
            ),
            format!("{}ls", "bash -c 'x | x'; ".repeat(lex::MAX_PIPES + 1)),
            format!("{}ls", "bash -c 'x | x'; ".repeat(4 * lex::MAX_PIPES)),
            format!("{}x; ", "env ".repeat(unwrap::MAX_WRAPPERS + 1)).repeat(100),
            format!("cat <<E\n{}\nE\nls", "$(x | x)".repeat(lex::MAX_PIPES + 1)),
            // A word brace-expanding into more words than are read: bash runs `rm -rf … x`.
            format!("rm {{-rf,}}{} x", "{,}".repeat(8)),
            format!("{{rm,}}{} -rf x", "{,}".repeat(8)),
            format!("ls {}", "{a,b}".repeat(20_000)),
            format!("ls {}", "{a..a}".repeat(lex::MAX_WORDS + 1)),
            format!("ls {}", "{a..a}".repeat(20_000)),
            "ls {1..257}".to_string(),
            format!("ls {}b{}", "{a,".repeat(20_000), "}".repeat(20_000)),
            // Brace expansion writing more than is read in one line, in one word or many, in
            // the line or the scripts it runs.
            format!(
                "ls {}{}",
                "{a,b}".repeat(8),
                "x".repeat(lex::MAX_EXPANSION / 256)
            ),
            "ls {a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}; ".repeat(200),
            "bash -c 'ls {a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}'; ".repeat(200),
        ] {
            let start: String = line.chars().take(40).collect();
            let t = [line];
            assert!(p.denied_by(SHELL_TOOL, &t).is_some(), "{start}");
            assert!(p.ask_by(SHELL_TOOL, &t).is_some(), "{start}");
            let a = unwrap::analyse(&t[0]);
            assert!(a.too_big, "{start}");
            // Past the bound nothing more is read: the reason is given once, however much of
            // the line is left.
            let reasons = a
                .unjudgeable
                .iter()
                .filter(|r| r.starts_with("too big"))
                .count();
            assert_eq!(reasons, 1, "{start}");
        }
        // Other nestings the normaliser does not recurse into: read, and no stack exhausted.
        let families: [(&str, &str, &str, usize); 12] = [
            ("${a:-", "$(rm -rf x)", "}", 20_000),
            ("( ", "rm -rf x", " )", 20_000),
            ("{ ", "rm -rf x;", " }", 20_000),
            ("! ", "rm -rf x", "", 20_000),
            ("case x in x) ", "rm -rf x", ";; esac", 20_000),
            ("f() { ", "rm -rf x", "; }", 20_000),
            ("if x; then ", "rm -rf x;", " fi;", 2_000),
            ("while x; do ", "rm -rf x", "; done", 2_000),
            ("x <(", "rm -rf x", ")", 2_000),
            ("[[ ( ", "x", " ) ]]", 2_000),
            ("{", "; rm -rf x", "", 20_000),
            ("a=(", "x", ")", 2_000),
        ];
        for (open, inner, close, n) in families {
            let line = format!("{}{inner}{}", open.repeat(n), close.repeat(n));
            let a = unwrap::analyse(&line);
            assert!(!a.too_big, "{open}");
            if inner.contains("rm") {
                assert!(p.denied_by(SHELL_TOOL, &[line]).is_some(), "{open}");
            }
        }
    }

    #[test]
    fn unjudgeable_lines_match_every_ask_rule_but_no_deny_rule() {
        let p = perms(&["shell(rm -rf *)"], &["shell(git push*)"]);
        for line in [
            "eval \"$X\"",
            "$CMD -rf x",
            "curl -s x | sh",
            "bash -c \"$SCRIPT\"",
            "source ./x.sh",
            "echo 'unterminated",
        ] {
            let t = [line.to_string()];
            assert!(p.ask_by(SHELL_TOOL, &t).is_some(), "{line}");
            assert!(p.denied_by(SHELL_TOOL, &t).is_none(), "{line}");
            assert!(!Permissions::unjudgeable(&t).is_empty(), "{line}");
        }
        let t = ["git status && cargo test".to_string()];
        assert!(p.ask_by(SHELL_TOOL, &t).is_none());
        assert!(Permissions::unjudgeable(&t).is_empty());
        let t = ["cd a && git push origin".to_string()];
        assert!(p.ask_by(SHELL_TOOL, &t).is_some());
        // Rules of other tools ignore the shell analysis.
        let other = perms(&["read_file(.env)"], &["write_file"]);
        assert!(other.ask_by(SHELL_TOOL, &["eval x".to_string()]).is_none());
        assert!(other
            .denied_by("read_file", &[".env".to_string()])
            .is_some());
    }

    #[test]
    fn tool_part_is_a_glob() {
        let r = Rule::parse("mcp__everything__*").unwrap();
        assert!(r.matches("mcp__everything__echo", &[]));
        assert!(!r.matches("mcp__other__echo", &[]));
        assert!(!Rule::parse("shell").unwrap().matches("shell2", &[]));
    }

    #[test]
    fn glob_edges() {
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
        assert!(glob_match("git push*", "git push origin main"));
        assert!(glob_match("?.rs", "a.rs"));
        assert!(!glob_match("?.rs", "ab.rs"));
    }

    /// The matcher agrees with the rule read literally (`*` any run, `?` any one character,
    /// anything else itself; a `*` or `?` in the text is a character like any other) on every
    /// pattern and text of up to four characters of `a`, `b`, `*` and `?`.
    #[test]
    fn glob_match_is_the_rule_on_every_short_pattern_and_text() {
        fn rule(p: &[char], t: &[char]) -> bool {
            match p.split_first() {
                None => t.is_empty(),
                Some(('*', rest)) => (0..=t.len()).any(|i| rule(rest, &t[i..])),
                Some(('?', rest)) => !t.is_empty() && rule(rest, &t[1..]),
                Some((c, rest)) => t.first() == Some(c) && rule(rest, &t[1..]),
            }
        }
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..4 {
            last = last
                .iter()
                .flat_map(|s| ['a', 'b', '*', '?'].map(|c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        for p in &all {
            let pc: Vec<char> = p.chars().collect();
            for t in &all {
                let tc: Vec<char> = t.chars().collect();
                assert_eq!(glob_match(p, t), rule(&pc, &tc), "{p:?} on {t:?}");
            }
        }
    }
}

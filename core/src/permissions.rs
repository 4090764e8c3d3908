//! Permission rules: `Tool` or `Tool(glob)` in `deny` and `ask` lists.
//!
//! A rule with no glob matches every call of the tool; with a glob it matches when any of the
//! call's targets (see [`crate::tool::ToolPlan::targets`]) matches. The glob language is `*`
//! (any run of characters, `/` included), `?` (one character) and literal text; it is matched
//! against the whole target.

use serde::{Deserialize, Serialize};

/// One parsed rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rule {
    /// The tool the rule applies to.
    pub tool: String,
    /// The argument pattern (a command glob for `shell`, a path glob for file tools); `None` matches every call.
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

    /// Whether the rule matches a call of `tool` with these targets.
    pub fn matches(&self, tool: &str, targets: &[String]) -> bool {
        if self.tool != tool {
            return false;
        }
        match &self.pattern {
            None => true,
            Some(p) => targets.iter().any(|t| glob_match(p, t)),
        }
    }
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
        self.deny.iter().find(|r| r.matches(tool, targets))
    }

    /// The first ask rule matching the call.
    pub fn ask_by(&self, tool: &str, targets: &[String]) -> Option<&Rule> {
        self.ask.iter().find(|r| r.matches(tool, targets))
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
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
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
}

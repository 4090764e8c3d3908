//! `${VAR}` and `${VAR:-default}` in MCP server definitions, as Claude Code documents them for
//! `.mcp.json`: `${VAR}` is the value of `VAR`; `${VAR:-default}` is `VAR`'s value when it is
//! set and not empty, else `default` (which is taken literally). Anything else (`$VAR`, an
//! unclosed `${`, an invalid name) is literal text.
//!
//! Invariant: expansion reads variables only through the lookup it is given; which variables
//! a definition may read (never the provider key's, for a project's server) is decided by the
//! caller before anything is expanded ([`vars`] lists them).

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Var {
        name: &'a str,
        default: Option<&'a str>,
    },
}

fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else { break };
        let inner = &after[..j];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if !valid_env_name(name) {
            out.push(Piece::Text(&rest[..i + 2]));
            rest = after;
            continue;
        }
        if i > 0 {
            out.push(Piece::Text(&rest[..i]));
        }
        out.push(Piece::Var { name, default });
        rest = &after[j + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// The variables `s` refers to, in order, each once.
pub fn vars(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in pieces(s) {
        if let Piece::Var { name, .. } = p {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// The variable `s` forwards whole, when `s` is exactly `${VAR}`.
pub fn whole_var(s: &str) -> Option<&str> {
    match pieces(s).as_slice() {
        [Piece::Var {
            name,
            default: None,
        }] => Some(name),
        _ => None,
    }
}

/// Expand `s`. `Err(VAR)` names the first variable that is unset and has no default, when
/// `strict`; otherwise such a variable expands to nothing.
pub fn expand(
    s: &str,
    get: &dyn Fn(&str) -> Option<String>,
    strict: bool,
) -> Result<String, String> {
    let mut out = String::new();
    for p in pieces(s) {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Var { name, default } => match (get(name), default) {
                (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) if strict => return Err(name.to_string()),
                (None, None) => {}
            },
        }
    }
    Ok(out)
}

/// A POSIX-style variable name: a letter or `_`, then letters, digits or `_`.
pub fn valid_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "HOST" => Some("example.test".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn claude_code_forms() {
        let e = |s: &str| expand(s, &env, true);
        assert_eq!(e("${HOST}").unwrap(), "example.test");
        assert_eq!(
            e("${API_BASE_URL:-https://api.example.com}/mcp").unwrap(),
            "https://api.example.com/mcp"
        );
        assert_eq!(
            e("https://${HOST:-x}/v1").unwrap(),
            "https://example.test/v1"
        );
        assert_eq!(e("${EMPTY:-fallback}").unwrap(), "fallback");
        assert_eq!(e("${EMPTY}").unwrap(), "");
        assert_eq!(e("${MISSING:-}").unwrap(), "");
        assert_eq!(e("Bearer ${API_KEY}"), Err("API_KEY".into()));
        assert_eq!(expand("Bearer ${API_KEY}", &env, false).unwrap(), "Bearer ");
        // Not templates: literal.
        assert_eq!(
            e("$HOST ${1X} ${unclosed").unwrap(),
            "$HOST ${1X} ${unclosed"
        );
        assert_eq!(
            vars("${A:-x}/${B}/${A}/${9}"),
            vec!["A".to_string(), "B".to_string()]
        );
        assert_eq!(whole_var("${TOKEN}"), Some("TOKEN"));
        assert_eq!(whole_var("${TOKEN:-x}"), None);
        assert_eq!(whole_var("Bearer ${TOKEN}"), None);
    }
}

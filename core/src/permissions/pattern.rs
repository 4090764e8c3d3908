//! Bash's pathname patterns (`*`, `?`, `[…]` with `!`/`^`, ranges and `[:class:]`, `\`
//! escapes), matched against one name: which programs a command name written as a glob may
//! run (`r?`, `[r]m`, `r[a-z]` may all run `rm`).
//!
//! Invariant: a bracket expression that does not close is the literal `[`, as in bash; a
//! character class this module does not know matches every character (a pattern is judged as
//! naming more programs, never fewer).

/// One element of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Star,
    One,
    Lit(char),
    Set { negated: bool, items: Vec<Item> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Char(char),
    Range(char, char),
    Class(String),
}

/// Whether the pattern holds an unescaped `*`, `?` or a bracket expression.
pub fn is_pattern(pattern: &str) -> bool {
    parse(pattern).iter().any(|t| !matches!(t, Tok::Lit(_)))
}

/// The text a pattern without `*`, `?` or a bracket expression matches (its escapes removed).
pub fn literal(pattern: &str) -> Option<String> {
    parse(pattern)
        .into_iter()
        .map(|t| match t {
            Tok::Lit(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// Whether bash's pattern `pattern` matches all of `name`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p = parse(pattern);
    let t: Vec<char> = name.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] != Tok::Star && one(&p[pi], t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == Tok::Star {
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
    p[pi..].iter().all(|t| *t == Tok::Star)
}

fn one(tok: &Tok, c: char) -> bool {
    match tok {
        Tok::Star => true,
        Tok::One => true,
        Tok::Lit(l) => *l == c,
        Tok::Set { negated, items } => {
            let hit = items.iter().any(|i| match i {
                Item::Char(x) => *x == c,
                Item::Range(a, b) => (*a..=*b).contains(&c),
                Item::Class(name) => class(name, c),
            });
            hit != *negated
        }
    }
}

fn class(name: &str, c: char) -> bool {
    match name {
        "alpha" => c.is_alphabetic(),
        "digit" => c.is_ascii_digit(),
        "alnum" => c.is_alphanumeric(),
        "lower" => c.is_lowercase(),
        "upper" => c.is_uppercase(),
        "space" | "blank" => c.is_whitespace(),
        "punct" => c.is_ascii_punctuation(),
        "xdigit" => c.is_ascii_hexdigit(),
        "word" => c.is_alphanumeric() || c == '_',
        // Unknown: judged as matching.
        _ => true,
    }
}

fn parse(pattern: &str) -> Vec<Tok> {
    let c: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\\' => {
                out.push(Tok::Lit(*c.get(i + 1).unwrap_or(&'\\')));
                i += 2;
            }
            '*' => {
                if out.last() != Some(&Tok::Star) {
                    out.push(Tok::Star);
                }
                i += 1;
            }
            '?' => {
                out.push(Tok::One);
                i += 1;
            }
            '[' => match bracket(&c, i + 1) {
                Some((tok, next)) => {
                    out.push(tok);
                    i = next;
                }
                None => {
                    out.push(Tok::Lit('['));
                    i += 1;
                }
            },
            l => {
                out.push(Tok::Lit(l));
                i += 1;
            }
        }
    }
    out
}

/// A bracket expression starting after its `[` at `i`: the token and the index after its `]`.
fn bracket(c: &[char], mut i: usize) -> Option<(Tok, usize)> {
    let negated = matches!(c.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    while i < c.len() {
        let ch = c[i];
        if ch == ']' && !first {
            return Some((Tok::Set { negated, items }, i + 1));
        }
        first = false;
        if ch == '[' && c.get(i + 1) == Some(&':') {
            let rest: String = c[i + 2..].iter().collect();
            if let Some(end) = rest.find(":]") {
                items.push(Item::Class(rest[..end].to_string()));
                i += 2 + rest[..end].chars().count() + 2;
                continue;
            }
        }
        let lo = if ch == '\\' {
            i += 1;
            *c.get(i)?
        } else {
            ch
        };
        if c.get(i + 1) == Some(&'-') && c.get(i + 2).is_some_and(|&h| h != ']') {
            let hi = c[i + 2];
            items.push(Item::Range(lo, hi));
            i += 3;
        } else {
            items.push(Item::Char(lo));
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_patterns() {
        for p in [
            "r?",
            "r*",
            "*",
            "[r]m",
            "r[a-z]",
            "r[!_]",
            "r[^x]",
            "[[:alpha:]]m",
            "\\rm",
            "r[m]",
        ] {
            assert!(matches(p, "rm"), "{p}");
            assert!(is_pattern(p) || p == "\\rm", "{p}");
        }
        for p in ["r?x", "[!r]m", "r[a-l]", "x*", "r\\*"] {
            assert!(!matches(p, "rm"), "{p}");
        }
        assert!(matches("[]]x", "]x"));
        // A set's leading `!` or `^` negates it and is no member, nor is the `[` opening it.
        for (p, name) in [("r[!x]", "r!"), ("r[^x]", "r^"), ("r[!x]", "r[")] {
            assert!(matches(p, name), "{p} {name}");
        }
        assert!(!matches("r[!!]", "r!"));
        // A backslash in a set takes the next character as a member: `]` and `-` too.
        assert!(matches("r[\\]]", "r]"));
        assert!(matches("r[a\\-z]", "r-"));
        assert!(!matches("r[a\\-z]", "rb"));
        // A colon that does not follow `[` is a member, not a class's start (as bash has it).
        for name in [":m", "xm", "ym"] {
            assert!(matches("[x:y:]m", name), "{name}");
        }
        assert!(matches("[a", "[a"));
        assert!(!is_pattern("[a"));
        assert!(!is_pattern("r\\*"));
    }

    #[test]
    fn each_character_class_takes_its_members_and_only_them() {
        // (class, a member, a non-member), as bash's `[[:class:]]` reads them.
        for (class, yes, no) in [
            ("alpha", 'r', '1'),
            ("digit", '7', 'x'),
            ("alnum", '7', '-'),
            ("lower", 'r', 'R'),
            ("upper", 'R', 'r'),
            ("space", ' ', 'x'),
            ("blank", '\t', 'x'),
            ("punct", '-', 'x'),
            ("xdigit", 'f', 'g'),
            ("word", '_', '-'),
        ] {
            let p = format!("[[:{class}:]]m");
            assert!(matches(&p, &format!("{yes}m")), "{p} {yes:?}");
            assert!(!matches(&p, &format!("{no}m")), "{p} {no:?}");
            let negated = format!("[![:{class}:]]m");
            assert!(matches(&negated, &format!("{no}m")), "{negated} {no:?}");
        }
        // An unknown class is judged as matching (a rule must not miss because of it).
        assert!(matches("[[:nonsense:]]m", "xm"));
    }
}

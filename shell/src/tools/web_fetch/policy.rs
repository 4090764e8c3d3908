//! `[tools.web_fetch]` as the tool applies it: the hosts fetched without asking (`allow`),
//! never fetched (`deny`), allowed to be on a private, loopback or link-local address
//! (`allow_private`), and the caps.
//!
//! Invariants: host names compare case-insensitively, IPv6 literals with or without their
//! brackets; `allow` and `deny` entries are exact names or globs (`*.example.com`: `*` any run
//! of characters); `allow_private` entries are exact names only (a glob would let any name
//! under it, which anyone can point at any address, reach the user's network); `deny` wins.

/// What the user config says about web fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebPolicy {
    /// Hosts fetched without asking.
    pub allow: Vec<String>,
    /// Hosts never fetched.
    pub deny: Vec<String>,
    /// Hosts (as written in a URL) that may be on a private, loopback or link-local address.
    pub allow_private: Vec<String>,
    /// Bytes of a body read at most; the rest is cut.
    pub max_bytes: u64,
    /// The whole fetch, redirects included, in ms.
    pub timeout_ms: u64,
    /// Redirects followed at most.
    pub max_redirects: u32,
}

impl WebPolicy {
    /// Default body cap: 5 MB.
    pub const DEFAULT_MAX_BYTES: u64 = 5_000_000;
    /// Default time limit: 30 s.
    pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
    /// Default redirect limit.
    pub const DEFAULT_MAX_REDIRECTS: u32 = 5;
}

impl Default for WebPolicy {
    fn default() -> Self {
        WebPolicy {
            allow: Vec::new(),
            deny: Vec::new(),
            allow_private: Vec::new(),
            max_bytes: Self::DEFAULT_MAX_BYTES,
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
            max_redirects: Self::DEFAULT_MAX_REDIRECTS,
        }
    }
}

/// What the policy says about one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostVerdict {
    /// `deny` names it (the entry that matched).
    Denied(String),
    /// `allow` names it.
    Allowed,
    /// Neither: a human is asked in `ask` and `readonly` modes.
    Ask,
}

/// `host` lowercased and without the brackets of an IPv6 literal.
pub fn normal(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

fn matches(entry: &str, host: &str) -> bool {
    let entry = normal(entry);
    if entry.contains('*') || entry.contains('?') {
        openmax_core::permissions::glob_match(&entry, host)
    } else {
        entry == host
    }
}

impl WebPolicy {
    /// The verdict on `host`.
    pub fn verdict(&self, host: &str) -> HostVerdict {
        let host = normal(host);
        if let Some(d) = self.deny.iter().find(|d| matches(d, &host)) {
            return HostVerdict::Denied(d.clone());
        }
        if self.allow.iter().any(|a| matches(a, &host)) {
            HostVerdict::Allowed
        } else {
            HostVerdict::Ask
        }
    }

    /// Whether `host` may be on a private, loopback or link-local address.
    pub fn private_allowed(&self, host: &str) -> bool {
        let host = normal(host);
        self.allow_private.iter().any(|p| normal(p) == host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_wins_globs_match_subdomains_private_needs_the_exact_name() {
        let p = WebPolicy {
            allow: vec!["docs.rs".into(), "*.Example.com".into(), "[::1]".into()],
            deny: vec!["bad.example.com".into()],
            allow_private: vec!["127.0.0.1".into(), "*.corp".into(), "wiki.corp".into()],
            ..WebPolicy::default()
        };
        assert_eq!(p.verdict("DOCS.RS"), HostVerdict::Allowed);
        assert_eq!(p.verdict("a.example.com"), HostVerdict::Allowed);
        assert_eq!(p.verdict("example.com"), HostVerdict::Ask);
        assert_eq!(
            p.verdict("bad.example.com"),
            HostVerdict::Denied("bad.example.com".into())
        );
        assert_eq!(p.verdict("::1"), HostVerdict::Allowed);
        assert!(p.private_allowed("127.0.0.1"));
        assert!(p.private_allowed("wiki.corp"));
        assert!(
            !p.private_allowed("other.corp"),
            "no globs for private addresses"
        );
        assert!(!p.private_allowed("localhost"));
    }
}

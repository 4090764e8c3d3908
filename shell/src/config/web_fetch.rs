//! `[tools.web_fetch]`: the hosts `web_fetch` reaches without asking, never, or on internal
//! addresses, and its caps. Layered like the rest, with a project config (agent-writable) only
//! able to narrow: it may add `deny` entries and lower the caps, never set `allow` or
//! `allow_private`.

use std::path::Path;

use serde::Deserialize;

use super::error::ConfigError;
use crate::tools::web_fetch::policy::WebPolicy;

/// `[tools]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    #[serde(default)]
    pub web_fetch: WebFetchSection,
}

/// `[tools.web_fetch]` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebFetchSection {
    /// Hosts fetched without asking (user config only).
    pub allow: Option<Vec<String>>,
    /// Hosts never fetched (lists of both layers are joined).
    #[serde(default)]
    pub deny: Vec<String>,
    /// Hosts that may be on private, loopback or link-local addresses (user config only).
    pub allow_private: Option<Vec<String>>,
    /// Bytes of a body read at most.
    pub max_bytes: Option<u64>,
    /// Seconds a whole fetch may take (fractions allowed).
    pub timeout_s: Option<f64>,
    /// Redirects followed at most.
    pub max_redirects: Option<u32>,
}

/// `over` (the later layer) over `base`.
pub fn merge(base: ToolsSection, over: ToolsSection) -> ToolsSection {
    let (b, o) = (base.web_fetch, over.web_fetch);
    let mut deny = b.deny;
    deny.extend(o.deny);
    ToolsSection {
        web_fetch: WebFetchSection {
            allow: o.allow.or(b.allow),
            deny,
            allow_private: o.allow_private.or(b.allow_private),
            max_bytes: o.max_bytes.or(b.max_bytes),
            timeout_s: o.timeout_s.or(b.timeout_s),
            max_redirects: o.max_redirects.or(b.max_redirects),
        },
    }
}

/// Refuse a project section that widens what the user's allows.
pub fn narrow(
    path: &Path,
    user: &WebFetchSection,
    project: &WebFetchSection,
) -> Result<(), ConfigError> {
    let file = path.display();
    for (key, set) in [
        ("allow", project.allow.is_some()),
        ("allow_private", project.allow_private.is_some()),
    ] {
        if set {
            return Err(ConfigError(format!(
                "{file}: [tools.web_fetch] {key} is not allowed in a project config (a project \
                 must not open hosts to the agent); set it in $OPENMAX_HOME/config.toml"
            )));
        }
    }
    let d = WebPolicy::default();
    let caps = [
        (
            "max_bytes",
            project.max_bytes.map(|v| v as f64),
            user.max_bytes.map(|v| v as f64),
            d.max_bytes as f64,
        ),
        (
            "timeout_s",
            project.timeout_s,
            user.timeout_s,
            d.timeout_ms as f64 / 1000.0,
        ),
        (
            "max_redirects",
            project.max_redirects.map(f64::from),
            user.max_redirects.map(f64::from),
            f64::from(d.max_redirects),
        ),
    ];
    for (key, proj, user, default) in caps {
        let (limit, whose) = match user {
            Some(u) => (u, "the user's value"),
            None => (default, "the default"),
        };
        if let Some(p) = proj.filter(|p| *p > limit) {
            return Err(ConfigError(format!(
                "{file}: [tools.web_fetch] {key} = {p} would raise {whose} {limit} (a project \
                 config can only lower it; raise it in $OPENMAX_HOME/config.toml)"
            )));
        }
    }
    Ok(())
}

/// The longest `timeout_s` a config may set, in seconds.
pub const MAX_TIMEOUT_S: f64 = 3600.0;

/// The policy the merged section gives.
pub fn resolve(s: &WebFetchSection) -> Result<WebPolicy, ConfigError> {
    let d = WebPolicy::default();
    let timeout_ms = match s.timeout_s {
        Some(t) if !t.is_finite() || t <= 0.0 || t > MAX_TIMEOUT_S => {
            return Err(ConfigError(format!(
                "[tools.web_fetch] timeout_s must be more than 0 and at most {MAX_TIMEOUT_S} \
                 seconds"
            )))
        }
        Some(t) => (t * 1000.0).round() as u64,
        None => d.timeout_ms,
    };
    if s.max_bytes == Some(0) {
        return Err(ConfigError(
            "[tools.web_fetch] max_bytes must be at least 1".to_string(),
        ));
    }
    for (key, list) in [
        ("allow", s.allow.as_deref().unwrap_or(&[])),
        ("deny", &s.deny[..]),
        ("allow_private", s.allow_private.as_deref().unwrap_or(&[])),
    ] {
        if let Some(bad) = list
            .iter()
            .find(|h| h.trim().is_empty() || h.contains('/') || h.contains(' '))
        {
            return Err(ConfigError(format!(
                "[tools.web_fetch] {key}: {bad:?} is not a host name (write `docs.rs`, \
                 `*.example.com` or `127.0.0.1`, without a scheme or path)"
            )));
        }
    }
    if let Some(glob) = s
        .allow_private
        .iter()
        .flatten()
        .find(|h| h.contains('*') || h.contains('?'))
    {
        return Err(ConfigError(format!(
            "[tools.web_fetch] allow_private: {glob:?} is a glob; name each host exactly (a \
             glob would let any name under it, which anyone can point at an internal address, \
             reach your network)"
        )));
    }
    Ok(WebPolicy {
        allow: s.allow.clone().unwrap_or_default(),
        deny: s.deny.clone(),
        allow_private: s.allow_private.clone().unwrap_or_default(),
        max_bytes: s.max_bytes.unwrap_or(d.max_bytes),
        timeout_ms,
        max_redirects: s.max_redirects.unwrap_or(d.max_redirects),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(t: &str) -> WebFetchSection {
        toml::from_str::<super::super::FileConfig>(t)
            .unwrap()
            .tools
            .web_fetch
    }

    #[test]
    fn a_timeout_is_more_than_0_and_at_most_an_hour() {
        for bad in ["0", "-1", "nan", "inf", "3600.5"] {
            let s = section(&format!("[tools.web_fetch]\ntimeout_s = {bad}\n"));
            let e = resolve(&s).unwrap_err();
            assert!(e.0.contains("timeout_s must be more than 0"), "{bad}: {e}");
        }
        let at = |t: &str| resolve(&section(&format!("[tools.web_fetch]\ntimeout_s = {t}\n")));
        assert_eq!(at("3600").unwrap().timeout_ms, 3_600_000);
        assert_eq!(at("0.25").unwrap().timeout_ms, 250);
    }

    #[test]
    fn a_project_may_only_deny_and_lower() {
        let p = Path::new("/p/.openmax/config.toml");
        let user = section("[tools.web_fetch]\nallow = [\"docs.rs\"]\nmax_bytes = 1000\n");
        let ok = section("[tools.web_fetch]\ndeny = [\"x.org\"]\nmax_bytes = 10\ntimeout_s = 5\n");
        narrow(p, &user, &ok).unwrap();
        let e = narrow(
            p,
            &user,
            &section("[tools.web_fetch]\nallow = [\"evil.org\"]\n"),
        )
        .unwrap_err();
        assert!(
            e.0.contains("allow is not allowed in a project config"),
            "{e}"
        );
        let e = narrow(
            p,
            &user,
            &section("[tools.web_fetch]\nallow_private = [\"10.0.0.1\"]\n"),
        )
        .unwrap_err();
        assert!(e.0.contains("allow_private"), "{e}");
        let e = narrow(p, &user, &section("[tools.web_fetch]\nmax_bytes = 2000\n")).unwrap_err();
        assert!(
            e.0.contains("max_bytes = 2000 would raise the user's value 1000"),
            "{e}"
        );
        let e = narrow(p, &user, &section("[tools.web_fetch]\ntimeout_s = 60\n")).unwrap_err();
        assert!(e.0.contains("timeout_s"), "{e}");
        let merged = merge(
            ToolsSection { web_fetch: user },
            ToolsSection { web_fetch: ok },
        );
        let policy = resolve(&merged.web_fetch).unwrap();
        assert_eq!(policy.allow, ["docs.rs"]);
        assert_eq!(policy.deny, ["x.org"]);
        assert_eq!((policy.max_bytes, policy.timeout_ms), (10, 5000));
    }

    #[test]
    fn nonsense_is_refused_with_the_key() {
        let e = |t: &str| resolve(&section(t)).unwrap_err().0;
        assert!(e("[tools.web_fetch]\ntimeout_s = 0\n").contains("timeout_s"));
        assert!(e("[tools.web_fetch]\nmax_bytes = 0\n").contains("max_bytes"));
        assert!(
            e("[tools.web_fetch]\nallow = [\"https://docs.rs/x\"]\n").contains("not a host name")
        );
        assert!(e("[tools.web_fetch]\nallow_private = [\"*.corp\"]\n").contains("is a glob"));
        assert_eq!(resolve(&section("")).unwrap(), WebPolicy::default());
        assert!(
            toml::from_str::<super::super::FileConfig>("[tools.web_fetch]\nallo = []\n").is_err()
        );
    }
}

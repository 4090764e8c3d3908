//! The environment agent processes (the `shell` tool, external tools, hooks) receive.
//!
//! Invariants:
//! - `OPENMAX_HOME` and `OPENMAX_AGENT_SESSION` from openmax's own environment are never
//!   passed on; the agent-session variable is set by the caller to this session's id.
//! - The configured provider key variables are never passed on, whatever the allow list says.
//! - By default no variable whose name contains KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL
//!   (case-insensitive) is passed on; `[sandbox] env_allow` names exceptions, `env_deny` names
//!   more variables to withhold.

/// Name fragments that mark a variable as a secret (compared case-insensitively).
pub const SECRET_MARKERS: [&str; 5] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"];

/// Variables never passed to an agent process.
pub const NEVER: [&str; 2] = ["OPENMAX_HOME", "OPENMAX_AGENT_SESSION"];

/// Which variables of openmax's environment an agent process may see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// The provider's key variables (always withheld).
    pub key_vars: Vec<String>,
    /// Names passed on even though they look like secrets (`[sandbox] env_allow`).
    pub allow: Vec<String>,
    /// Names withheld besides the secret-looking ones (`[sandbox] env_deny`).
    pub deny: Vec<String>,
}

impl EnvPolicy {
    /// Whether a variable named `name` may be passed on.
    pub fn passes(&self, name: &str) -> bool {
        if NEVER.contains(&name) || self.key_vars.iter().any(|k| k == name) {
            return false;
        }
        if self.deny.iter().any(|d| d == name) {
            return false;
        }
        if self.allow.iter().any(|a| a == name) {
            return true;
        }
        !looks_secret(name)
    }

    /// The subset of `vars` that may be passed on, in their order.
    pub fn filter(
        &self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Vec<(String, String)> {
        vars.into_iter().filter(|(k, _)| self.passes(k)).collect()
    }
}

/// Whether a name contains one of [`SECRET_MARKERS`], ignoring case.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|m| upper.contains(m))
}

/// Replace every occurrence of each secret value in `text` with `[redacted]`. Values shorter
/// than 4 bytes are not searched for (they would redact ordinary text, not secrets).
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "[redacted]");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_keys_are_withheld() {
        let p = EnvPolicy {
            key_vars: vec!["MY_PROVIDER".into()],
            allow: vec!["GPG_KEY_ID".into(), "MY_PROVIDER".into()],
            deny: vec!["DATABASE_URL".into()],
        };
        let vars = [
            "PATH",
            "HOME",
            "AWS_SECRET_ACCESS_KEY",
            "github_token",
            "DB_Password",
            "GCP_CREDENTIALS",
            "GPG_KEY_ID",
            "MY_PROVIDER",
            "DATABASE_URL",
            "OPENMAX_HOME",
            "OPENMAX_AGENT_SESSION",
            "LANG",
        ]
        .map(|k| (k.to_string(), "v".to_string()));
        let kept: Vec<String> = p.filter(vars).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kept, ["PATH", "HOME", "GPG_KEY_ID", "LANG"]);
    }

    #[test]
    fn redaction() {
        let s = vec!["sk-abc123".to_string(), "ab".to_string()];
        assert_eq!(
            redact("key=sk-abc123 and sk-abc123; ab", &s),
            "key=[redacted] and [redacted]; ab"
        );
    }
}

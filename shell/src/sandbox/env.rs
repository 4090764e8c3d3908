//! The environment agent processes (the `shell` tool, external tools, hooks) receive.
//!
//! Invariants:
//! - `OPENMAX_HOME` and `OPENMAX_AGENT_SESSION` from openmax's own environment are never
//!   passed on; the agent-session variable is set by the caller to this session's id.
//! - The configured provider key variables are never passed on, whatever the allow list says.
//! - By default no variable whose name contains KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL
//!   (case-insensitive) is passed on; `[sandbox] env_allow` names exceptions, `env_deny` names
//!   more variables to withhold.
//! - By default no variable that points at a service of the host ([`HOST_SERVICES`]: a terminal
//!   multiplexer, an agent socket, a bus, a display, a container engine, the terminal itself) is
//!   passed on; the sandbox refuses those sockets anyway, so the variable would only mislead.
//!   `[sandbox] env_allow` names exceptions.

/// Name fragments that mark a variable as a secret (compared case-insensitively).
pub const SECRET_MARKERS: [&str; 5] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"];

/// Variables that point at a service running outside the sandbox, withheld unless
/// `[sandbox] env_allow` names them.
pub const HOST_SERVICES: &[&str] = &[
    // Terminal multiplexers and terminals with a control socket.
    "TMUX",
    "TMUX_PANE",
    "STY",
    "ZELLIJ",
    "ZELLIJ_SESSION_NAME",
    "KITTY_LISTEN_ON",
    "KITTY_WINDOW_ID",
    "WEZTERM_UNIX_SOCKET",
    "ALACRITTY_SOCKET",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "EMACS_SOCKET_NAME",
    "VSCODE_IPC_HOOK",
    "VSCODE_IPC_HOOK_CLI",
    "VSCODE_GIT_IPC_HANDLE",
    "GPG_TTY",
    "WINDOWID",
    // Key agents and credential caches.
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "GNOME_KEYRING_CONTROL",
    "KRB5CCNAME",
    // Session and system buses, desktop and sound servers.
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "DBUS_STARTER_ADDRESS",
    "AT_SPI_BUS_ADDRESS",
    "SESSION_MANAGER",
    "DISPLAY",
    "XAUTHORITY",
    "WAYLAND_DISPLAY",
    "WAYLAND_SOCKET",
    "MIR_SOCKET",
    "I3SOCK",
    "SWAYSOCK",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "PULSE_SERVER",
    "PIPEWIRE_REMOTE",
    "XDG_RUNTIME_DIR",
    // Container engines.
    "DOCKER_HOST",
    "CONTAINER_HOST",
    // systemd's sockets and passed descriptors.
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "JOURNAL_STREAM",
];

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
        !looks_secret(name) && !HOST_SERVICES.contains(&name)
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
    fn host_service_variables_are_withheld_unless_allowed() {
        let p = EnvPolicy {
            allow: vec!["DISPLAY".into()],
            ..EnvPolicy::default()
        };
        for name in HOST_SERVICES {
            assert_eq!(p.passes(name), *name == "DISPLAY", "{name}");
        }
        assert!(p.passes("TERM") && p.passes("PATH"));
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

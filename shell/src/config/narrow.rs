//! A project config (agent-writable, or pulled with a repository) can only narrow what the
//! user config set: it cannot choose the provider (which decides where the user's key is sent)
//! nor name its prices (the user's own account), cannot widen the sandbox, and can only lower
//! limits.
//!
//! Invariant: every refusal names the project file, the key and the user's value (or the
//! default when the user config does not set it), and happens before the handshake.

use std::path::Path;

use openmax_core::machine::{Limits, RetrySettings, TaskLimits};

use super::error::ConfigError;
use super::file::FileConfig;
use super::settings::ToolTimeouts;

/// One limit: its key, the project's value, the user's (or default) value. `0` means "no
/// limit" for the keys in [`ZERO_IS_UNLIMITED`].
struct Limit {
    key: &'static str,
    project: Option<f64>,
    user: Option<f64>,
    default: f64,
}

/// Keys whose value 0 means "none" (so 0 is the widest value).
const ZERO_IS_UNLIMITED: [&str; 5] = [
    "[limits] max_agent_tokens",
    "[limits] approval_timeout_s",
    "[limits] tool_timeout_s",
    // 0 disables the idle timeout.
    "[provider] stream_idle_timeout_s",
    // 0 sends no cap (openai, openai-chat) or the adapter's own 8192 (anthropic).
    "[provider] max_output_tokens",
];

/// The output cap's key (its default is the provider's, checked by [`output_cap`]).
pub const OUTPUT_CAP: &str = "[provider] max_output_tokens";

/// Refuse a project config that widens what `user` set.
pub fn check(path: &Path, user: &FileConfig, project: &FileConfig) -> Result<(), ConfigError> {
    user_only(path, user, project)?;
    let file = path.display();
    for l in limits(user, project) {
        let Some(proj) = l.project else { continue };
        if l.user.is_none() && l.default.is_infinite() {
            continue;
        }
        let (user_value, whose) = match l.user {
            Some(v) => (v, "the user's value"),
            None => (l.default, "the default"),
        };
        if widens(l.key, proj, user_value) {
            return Err(ConfigError(format!(
                "{file}: {} = {} would raise {whose} {} (a project config can only lower \
                 limits; raise it in {})",
                l.key,
                show(proj),
                show(user_value),
                crate::session::shown("config.toml")
            )));
        }
    }
    Ok(())
}

/// Refuse what only the user config may set: the provider, prices, the sandbox's widening keys,
/// a Unix socket the user's list does not name.
fn user_only(path: &Path, user: &FileConfig, project: &FileConfig) -> Result<(), ConfigError> {
    let file = path.display();
    if project.provider.name.is_some() {
        return Err(ConfigError(format!(
            "{file}: [provider] name is not allowed in a project config (the provider decides \
             where your key is sent); the user's value is {}; set it in {} or pass \
             --provider",
            user.provider
                .name
                .as_deref()
                .map(|n| format!("{n:?}"))
                .unwrap_or_else(|| "unset".to_string()),
            crate::session::shown("config.toml")
        )));
    }
    if let Some(key) = super::prices::named_by(&project.provider) {
        return Err(ConfigError(format!(
            "{file}: [provider] {key} is not allowed in a project config (prices describe your \
             account with the provider, which only your config chooses); set it in \
             $OPENMAX_HOME/config.toml"
        )));
    }
    let s = &project.sandbox;
    if s.mode.is_some()
        || s.network == Some(true)
        || !s.env_allow.is_empty()
        || !s.writable.is_empty()
        || s.protected.is_some()
    {
        return Err(ConfigError(format!(
            "{file}: [sandbox] may only be narrowed in a project config (network = false, \
             env_deny, a subset of unix_sockets); mode, network = true, env_allow, writable \
             and protected belong in {}",
            crate::session::shown("config.toml")
        )));
    }
    if let Some(sockets) = &s.unix_sockets {
        let user_list = user.sandbox.unix_sockets.as_deref().unwrap_or(&[]);
        if let Some(extra) = sockets.iter().find(|p| !user_list.contains(p)) {
            return Err(ConfigError(format!(
                "{file}: [sandbox] unix_sockets may only remove entries in a project config: \
                 {extra:?} is not in the user's list ({user_list:?}); add it in {}",
                crate::session::shown("config.toml")
            )));
        }
    }
    Ok(())
}

/// Every limit a project may only lower: its key, the project's and the user's values, and the
/// default the project's is measured against when the user sets none. (Longer than most
/// functions here because it is a table: one entry per key, read top to bottom.)
fn limits(user: &FileConfig, project: &FileConfig) -> [Limit; 14] {
    let ld = Limits::default();
    let rd = RetrySettings::default();
    let (u, p) = (&user.limits, &project.limits);
    let (up, pp) = (&user.provider, &project.provider);
    [
        Limit {
            key: "[limits] max_iterations",
            project: p.max_iterations.map(f64::from),
            user: u.max_iterations.map(f64::from),
            default: f64::from(ld.max_iterations),
        },
        Limit {
            key: "[limits] max_agent_tokens",
            project: p.max_agent_tokens.map(|v| v as f64),
            user: u.max_agent_tokens.map(|v| v as f64),
            default: ld.max_agent_tokens as f64,
        },
        Limit {
            key: "[limits] max_reply_bytes",
            project: p.max_reply_bytes.map(|v| v as f64),
            user: u.max_reply_bytes.map(|v| v as f64),
            default: ld.max_reply_bytes as f64,
        },
        Limit {
            key: "[limits] max_thinking_bytes",
            project: p.max_thinking_bytes.map(|v| v as f64),
            user: u.max_thinking_bytes.map(|v| v as f64),
            default: ld.max_thinking_bytes as f64,
        },
        Limit {
            key: "[limits] max_tool_calls",
            project: p.max_tool_calls.map(f64::from),
            user: u.max_tool_calls.map(f64::from),
            default: f64::from(ld.max_tool_calls),
        },
        Limit {
            key: "[limits] drain_timeout_s",
            project: p.drain_timeout_s,
            user: u.drain_timeout_s,
            default: ld.drain_timeout_ms as f64 / 1000.0,
        },
        Limit {
            key: "[limits] approval_timeout_s",
            project: p.approval_timeout_s,
            user: u.approval_timeout_s,
            default: ld.approval_timeout_ms as f64 / 1000.0,
        },
        Limit {
            key: "[limits] tool_timeout_s",
            project: p.tool_timeout_s,
            user: u.tool_timeout_s,
            default: ToolTimeouts::default().tool_ms as f64 / 1000.0,
        },
        Limit {
            key: "[limits] shell_timeout_s",
            project: p.shell_timeout_s,
            user: u.shell_timeout_s,
            default: ToolTimeouts::default().shell_ms as f64 / 1000.0,
        },
        Limit {
            key: "[tasks] max_depth",
            project: project.tasks.max_depth.map(f64::from),
            user: user.tasks.max_depth.map(f64::from),
            default: f64::from(TaskLimits::default().max_depth),
        },
        Limit {
            key: "[tasks] max_parallel",
            project: project.tasks.max_parallel.map(f64::from),
            user: user.tasks.max_parallel.map(f64::from),
            default: f64::from(TaskLimits::default().max_parallel),
        },
        Limit {
            key: "[provider] max_attempts",
            project: pp.max_attempts.map(f64::from),
            user: up.max_attempts.map(f64::from),
            default: f64::from(rd.max_attempts),
        },
        Limit {
            key: "[provider] stream_idle_timeout_s",
            project: pp.stream_idle_timeout_s,
            user: up.stream_idle_timeout_s,
            default: rd.stream_idle_timeout_ms as f64 / 1000.0,
        },
        Limit {
            key: OUTPUT_CAP,
            project: pp.max_output_tokens.map(|v| v as f64),
            user: up.max_output_tokens.map(|v| v as f64),
            // The default is the provider's, known only once the environment and the flags
            // chose it: [`output_cap`] checks a project value the user config leaves open.
            default: f64::INFINITY,
        },
    ]
}

/// Refuse a project's `[provider] max_output_tokens` (`value`, set in `path`) that the user
/// config leaves unset and that would raise the default of the provider in use (`provider`,
/// whose default cap is `default`; 0 = none).
pub fn output_cap(
    path: &Path,
    value: u64,
    provider: &str,
    default: u64,
) -> Result<(), ConfigError> {
    if widens(OUTPUT_CAP, value as f64, default as f64) {
        return Err(ConfigError(format!(
            "{}: {OUTPUT_CAP} = {value} would raise the default {} of provider {provider} (a \
             project config can only lower limits; raise it in $OPENMAX_HOME/config.toml)",
            path.display(),
            if default == 0 {
                "none".to_string()
            } else {
                default.to_string()
            }
        )));
    }
    Ok(())
}

fn widens(key: &str, project: f64, user: f64) -> bool {
    if ZERO_IS_UNLIMITED.contains(&key) {
        let unlimited = |v: f64| v == 0.0;
        return match (unlimited(project), unlimited(user)) {
            (true, false) => true,
            (_, true) => false,
            (false, false) => project > user,
        };
    }
    project > user
}

fn show(v: f64) -> String {
    if v.is_infinite() {
        "none".to_string()
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_shown_as_written() {
        assert_eq!(show(f64::INFINITY), "none");
        assert_eq!(show(30.0), "30");
        assert_eq!(show(0.0), "0");
        assert_eq!(show(2.5), "2.5");
        assert_eq!(show(0.001), "0.001");
    }

    fn parse(t: &str) -> FileConfig {
        toml::from_str(t).unwrap()
    }

    fn err(user: &str, project: &str) -> String {
        check(
            Path::new("/p/.openmax/config.toml"),
            &parse(user),
            &parse(project),
        )
        .unwrap_err()
        .0
    }

    #[test]
    fn widening_is_refused_with_file_key_and_value() {
        let e = err(
            "[provider]\nname = \"anthropic\"\n",
            "[provider]\nname = \"openai-chat\"\n",
        );
        assert!(
            e.contains("/p/.openmax/config.toml")
                && e.contains("name")
                && e.contains("\"anthropic\""),
            "{e}"
        );
        let e = err(
            "[limits]\nmax_iterations = 10\n",
            "[limits]\nmax_iterations = 500\n",
        );
        assert!(
            e.contains("max_iterations = 500") && e.contains("the user's value 10"),
            "{e}"
        );
        let e = err("", "[limits]\nmax_iterations = 51\n");
        assert!(e.contains("the default 50"), "{e}");
        let e = err(
            "[limits]\nmax_agent_tokens = 1000\n",
            "[limits]\nmax_agent_tokens = 0\n",
        );
        assert!(e.contains("max_agent_tokens = 0"), "{e}");
        let e = err("", "[provider]\nmax_attempts = 99\n");
        assert!(e.contains("max_attempts"), "{e}");
        let e = err("", "[limits]\ntool_timeout_s = 61\n");
        assert!(
            e.contains("tool_timeout_s = 61") && e.contains("the default 60"),
            "{e}"
        );
        let e = err(
            "[limits]\ntool_timeout_s = 5\n",
            "[limits]\ntool_timeout_s = 0\n",
        );
        assert!(e.contains("tool_timeout_s = 0"), "{e}");
        let e = err("", "[limits]\nshell_timeout_s = 600\n");
        assert!(e.contains("the default 120"), "{e}");
        let e = err("", "[tasks]\nmax_depth = 2\n");
        assert!(
            e.contains("[tasks] max_depth = 2") && e.contains("the default 1"),
            "{e}"
        );
        let e = err("[tasks]\nmax_parallel = 2\n", "[tasks]\nmax_parallel = 3\n");
        assert!(e.contains("the user's value 2"), "{e}");
        assert!(check(
            Path::new("/p/.openmax/config.toml"),
            &parse("[tasks]\nmax_depth = 3\n"),
            &parse("[tasks]\nmax_depth = 0\nmax_parallel = 1\n"),
        )
        .is_ok());
        let e = err("", "[sandbox]\nenv_allow = [\"AWS_SECRET_ACCESS_KEY\"]\n");
        assert!(e.contains("[sandbox]"), "{e}");
        let e = err("", "[sandbox]\nwritable = [\"/\"]\n");
        assert!(e.contains("writable"), "{e}");
    }

    #[test]
    fn narrowing_is_allowed() {
        let p = Path::new("/p/.openmax/config.toml");
        let user = parse("[limits]\nmax_iterations = 10\nmax_agent_tokens = 0\n");
        let ok = parse(
            "[limits]\nmax_iterations = 5\nmax_agent_tokens = 100\n\
             [provider]\nmax_attempts = 2\nmodel = \"m\"\n[sandbox]\nnetwork = false\n",
        );
        assert!(check(p, &user, &ok).is_ok());
        assert!(check(p, &user, &FileConfig::default()).is_ok());
    }
}

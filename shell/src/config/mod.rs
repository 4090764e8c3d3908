//! Configuration: `$OPENMAX_HOME/config.toml`, then `<project>/.openmax/config.toml`, then the
//! environment (`OPENMAX_PROVIDER`, `OPENMAX_MODEL`, `OPENMAX_BASE_URL`), then flags; later
//! layers override earlier ones key by key. `[permissions]` lists are concatenated (user rules
//! first, then project rules); `[[hooks]]` likewise.
//!
//! Invariants:
//! - Every error names the file (and for a syntax error, its line and column) or the
//!   environment variable to set, and is reported before the handshake.
//! - A project file (agent-writable) can never set `base_url`, `api_key_env` or any key
//!   material: a project must not redirect credentials. It can only narrow the rest
//!   ([`narrow`]): no `provider.name`, limits only lowered, the sandbox never widened.
//! - Unknown keys are errors (a typo is never silently ignored), every one of a file reported
//!   at once with its line and the keys accepted there ([`keys`]).
//! - The API key itself is only ever read from the environment variable `api_key_env` names.

pub mod checkpoints;
pub mod error;
pub mod file;
pub mod keys;
pub mod narrow;
pub mod prices;
pub mod provider;
pub mod settings;
pub mod tasks;
pub mod web_fetch;

#[cfg(test)]
mod keys_tests;

use std::path::{Path, PathBuf};

use openmax_core::machine::{Limits, RetrySettings};
use openmax_core::permissions::{Permissions, Rule};

pub use error::ConfigError;
pub use file::{
    FileConfig, HookConfig, LimitsSection, PermissionsSection, ProviderSection, SandboxSection,
    TrustSection, PROVIDER_NAMES,
};
pub use settings::{Overrides, ProviderSettings, Settings, ToolTimeouts};

use crate::hooks::Origin;
use crate::mcp::config::McpSource;

/// The two layered files merged (no environment, no flags yet).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layers {
    pub merged: FileConfig,
    pub files: Vec<PathBuf>,
    /// `[[hooks]]` by origin, user first (`merged.hooks` holds the same tables without it).
    pub hooks: Vec<(HookConfig, Origin)>,
    /// `[mcp_servers]` of each file that has one, user first, with the file and its origin.
    pub mcp: Vec<McpSource>,
    /// The project file's `[provider] max_output_tokens` when the user config does not set it:
    /// [`resolve`] checks it against the default of the provider in use.
    pub project_output_cap: Option<(PathBuf, u64)>,
}

impl Layers {
    /// `[trust] projects` of the user config, canonicalized where they exist.
    pub fn trusted_projects(&self) -> Vec<PathBuf> {
        self.merged
            .trust
            .projects
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p)))
            .collect()
    }
}

/// Read `$OPENMAX_HOME/config.toml` and `<project>/.openmax/config.toml` (each optional).
pub fn load_layers(home: &Path, project: &Path) -> Result<Layers, ConfigError> {
    let mut layers = Layers::default();
    let user = home.join("config.toml");
    let mut user_cfg = FileConfig::default();
    if let Some(text) = read_optional(&user)? {
        let cfg = parse_file(&user, &text, false)?;
        user_cfg = cfg.clone();
        layers
            .hooks
            .extend(cfg.hooks.iter().map(|h| (h.clone(), Origin::User)));
        if !cfg.mcp_servers.is_empty() {
            layers.mcp.push(McpSource {
                path: user.clone(),
                origin: Origin::User,
                table: cfg.mcp_servers.clone(),
                lines: keys::Lines::of(&text),
            });
        }
        layers.merged = merge(layers.merged, cfg);
        layers.files.push(user);
    }
    let proj = project.join(".openmax").join("config.toml");
    if let Some(text) = read_optional(&proj)? {
        let cfg = parse_file(&proj, &text, true)?;
        narrow::check(&proj, &user_cfg, &cfg)?;
        if user_cfg.provider.max_output_tokens.is_none() {
            layers.project_output_cap = cfg.provider.max_output_tokens.map(|v| (proj.clone(), v));
        }
        web_fetch::narrow(&proj, &user_cfg.tools.web_fetch, &cfg.tools.web_fetch)?;
        layers
            .hooks
            .extend(cfg.hooks.iter().map(|h| (h.clone(), Origin::Project)));
        if !cfg.mcp_servers.is_empty() {
            layers.mcp.push(McpSource {
                path: proj.clone(),
                origin: Origin::Project,
                table: cfg.mcp_servers.clone(),
                lines: keys::Lines::of(&text),
            });
        }
        layers.merged = merge(layers.merged, cfg);
        layers.files.push(proj);
    }
    Ok(layers)
}

/// Apply env then flag overrides and read the API key (`env` looks a variable up).
pub fn resolve(
    layers: Layers,
    env_over: &Overrides,
    flags: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigError> {
    let trusted_projects = layers.trusted_projects();
    let p = layers.merged.provider;
    let chosen = provider::choose(&p, env_over, flags, env)?;
    if let Some((file, value)) = &layers.project_output_cap {
        narrow::output_cap(
            file,
            *value,
            &chosen.name,
            u64::from(chosen.kind.default_max_output_tokens()),
        )?;
    }
    let retry = retry_of(&p)?;
    let l = &layers.merged.limits;
    let limits = limits_of(l)?;
    let tool_timeouts = tool_timeouts_of(l)?;
    let permissions = permissions_of(&layers.merged.permissions)?;
    let provider::Chosen {
        name,
        kind,
        model,
        base_url,
        api_key_env,
        api_key,
        notice,
    } = chosen;
    Ok(Settings {
        provider: ProviderSettings {
            name: name.clone(),
            kind,
            model,
            base_url,
            api_key_env,
            api_key,
            max_output_tokens: p
                .max_output_tokens
                .unwrap_or(u64::from(kind.default_max_output_tokens())),
            prices: prices::resolve(&p)?,
        },
        notices: notice.into_iter().collect(),
        context_tokens: p
            .context_tokens
            .unwrap_or_else(|| default_context_tokens(&name)),
        retry,
        limits,
        permissions,
        hooks: layers.hooks,
        mcp: layers.mcp,
        trusted_projects,
        files: layers.files,
        web: web_fetch::resolve(&layers.merged.tools.web_fetch)?,
        checkpoints: layers.merged.checkpoints.caps()?,
        tasks: layers.merged.tasks.limits()?,
        sandbox: layers.merged.sandbox,
        tool_timeouts,
    })
}

/// `[provider]`'s retry settings over the defaults.
fn retry_of(p: &ProviderSection) -> Result<RetrySettings, ConfigError> {
    let defaults = RetrySettings::default();
    Ok(RetrySettings {
        max_attempts: p.max_attempts.unwrap_or(defaults.max_attempts).max(1),
        retry_base_ms: p.retry_base_ms.unwrap_or(defaults.retry_base_ms),
        retry_max_ms: defaults.retry_max_ms,
        stream_idle_timeout_ms: match p.stream_idle_timeout_s {
            Some(s) => seconds_to_ms(s, "[provider] stream_idle_timeout_s")?,
            None => defaults.stream_idle_timeout_ms,
        },
    })
}

/// `[limits]` over the defaults.
fn limits_of(l: &LimitsSection) -> Result<Limits, ConfigError> {
    let ldef = Limits::default();
    Ok(Limits {
        max_iterations: l.max_iterations.unwrap_or(ldef.max_iterations),
        max_agent_tokens: l.max_agent_tokens.unwrap_or(ldef.max_agent_tokens),
        approval_timeout_ms: match l.approval_timeout_s {
            Some(s) => seconds_to_ms(s, "[limits] approval_timeout_s")?,
            None => ldef.approval_timeout_ms,
        },
        max_reply_bytes: l.max_reply_bytes.unwrap_or(ldef.max_reply_bytes),
        max_thinking_bytes: l.max_thinking_bytes.unwrap_or(ldef.max_thinking_bytes),
        max_tool_calls: l.max_tool_calls.unwrap_or(ldef.max_tool_calls),
        drain_timeout_ms: match l.drain_timeout_s {
            Some(s) => seconds_to_ms(s, "[limits] drain_timeout_s")?,
            None => ldef.drain_timeout_ms,
        },
    })
}

/// `[limits]`'s tool timeouts over the defaults (a shell timeout within its bounds).
fn tool_timeouts_of(l: &LimitsSection) -> Result<ToolTimeouts, ConfigError> {
    let tdef = ToolTimeouts::default();
    Ok(ToolTimeouts {
        tool_ms: match l.tool_timeout_s {
            Some(s) => seconds_to_ms(s, "[limits] tool_timeout_s")?,
            None => tdef.tool_ms,
        },
        shell_ms: match l.shell_timeout_s {
            Some(s) if s <= 0.0 => {
                return Err(ConfigError(
                    "[limits] shell_timeout_s must be a positive number of seconds".to_string(),
                ))
            }
            Some(s) if s > crate::tools::SHELL_MAX_TIMEOUT_S => {
                return Err(ConfigError(format!(
                    "[limits] shell_timeout_s must be at most {} seconds",
                    crate::tools::SHELL_MAX_TIMEOUT_S
                )))
            }
            Some(s) => seconds_to_ms(s, "[limits] shell_timeout_s")?,
            None => tdef.shell_ms,
        },
    })
}

/// `[permissions]`: every rule parsed.
fn permissions_of(section: &PermissionsSection) -> Result<Permissions, ConfigError> {
    let mut permissions = Permissions::default();
    for r in &section.deny {
        permissions
            .deny
            .push(Rule::parse(r).map_err(|e| ConfigError(format!("[permissions] deny: {e}")))?);
    }
    for r in &section.ask {
        permissions
            .ask
            .push(Rule::parse(r).map_err(|e| ConfigError(format!("[permissions] ask: {e}")))?);
    }
    Ok(permissions)
}

fn default_context_tokens(provider: &str) -> u64 {
    match provider {
        "anthropic" => 200_000,
        "openai" => 400_000,
        _ => 128_000,
    }
}

fn seconds_to_ms(s: f64, key: &str) -> Result<u64, ConfigError> {
    if !s.is_finite() || s < 0.0 {
        return Err(ConfigError(format!(
            "{key} must be a non-negative number of seconds"
        )));
    }
    Ok((s * 1000.0).round() as u64)
}

fn read_optional(path: &Path) -> Result<Option<String>, ConfigError> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ConfigError(format!("{}: not valid UTF-8", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigError(format!("{}: {e}", path.display()))),
    }
}

/// Parse one file. `project`: refuse credential-redirecting keys.
pub fn parse_file(path: &Path, text: &str, project: bool) -> Result<FileConfig, ConfigError> {
    let at = |e: &toml::de::Error| -> String {
        match e.span() {
            Some(span) => {
                let (line, col) = file::line_col(text, span.start);
                format!("{}:{line}:{col}", path.display())
            }
            None => path.display().to_string(),
        }
    };
    let value: toml::Table = toml::from_str(text).map_err(|e| {
        ConfigError(format!(
            "{}: broken config file: {}",
            at(&e),
            e.message().trim()
        ))
    })?;
    if project {
        if value.contains_key("trust") {
            return Err(ConfigError(format!(
                "{}: [trust] is not allowed in a project config (a project cannot trust itself); \
                 set it in {} or run `openmax --trust` in the project",
                path.display(),
                crate::session::shown("config.toml")
            )));
        }
        if value.contains_key("checkpoints") {
            return Err(ConfigError(format!(
                "{}: [checkpoints] is not allowed in a project config (a project must not turn \
                 off or shrink the record of what its agent changes); set it in \
                 $OPENMAX_HOME/config.toml",
                path.display()
            )));
        }
        if let Some(toml::Value::Table(p)) = value.get("provider") {
            for key in p.keys() {
                if key == "base_url" || key.contains("api_key") || key == "key" {
                    return Err(ConfigError(format!(
                        "{}: [provider] {key} is not allowed in a project config (a project \
                         must not redirect credentials); set it in {}",
                        path.display(),
                        crate::session::shown("config.toml")
                    )));
                }
            }
        }
    }
    let unknown = keys::unknown(path, text);
    if !unknown.is_empty() {
        return Err(ConfigError(format!(
            "{}: {} unknown key{} (a typo is never ignored; each is listed with the keys \
             accepted where it stands):\n  {}",
            path.display(),
            unknown.len(),
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join("\n  ")
        )));
    }
    let cfg = toml::from_str::<FileConfig>(text)
        .map_err(|e| ConfigError(format!("{}: {}", at(&e), e.message().trim())))?;
    for (i, h) in cfg.hooks.iter().enumerate() {
        crate::hooks::validate(h)
            .map_err(|e| ConfigError(format!("{}: [[hooks]] #{}: {e}", path.display(), i + 1)))?;
    }
    Ok(cfg)
}

fn merge(base: FileConfig, over: FileConfig) -> FileConfig {
    let (b, o) = (base.provider, over.provider);
    let (bl, ol) = (base.limits, over.limits);
    let mut deny = base.permissions.deny;
    deny.extend(over.permissions.deny);
    let mut ask = base.permissions.ask;
    ask.extend(over.permissions.ask);
    let mut hooks = base.hooks;
    hooks.extend(over.hooks);
    let tools = web_fetch::merge(base.tools, over.tools);
    FileConfig {
        tools,
        provider: ProviderSection {
            name: o.name.or(b.name),
            model: o.model.or(b.model),
            base_url: o.base_url.or(b.base_url),
            api_key_env: o.api_key_env.or(b.api_key_env),
            context_tokens: o.context_tokens.or(b.context_tokens),
            max_attempts: o.max_attempts.or(b.max_attempts),
            retry_base_ms: o.retry_base_ms.or(b.retry_base_ms),
            stream_idle_timeout_s: o.stream_idle_timeout_s.or(b.stream_idle_timeout_s),
            max_output_tokens: o.max_output_tokens.or(b.max_output_tokens),
            price_in: o.price_in.or(b.price_in),
            price_out: o.price_out.or(b.price_out),
            price_cached_in: o.price_cached_in.or(b.price_cached_in),
        },
        limits: LimitsSection {
            max_iterations: ol.max_iterations.or(bl.max_iterations),
            max_agent_tokens: ol.max_agent_tokens.or(bl.max_agent_tokens),
            approval_timeout_s: ol.approval_timeout_s.or(bl.approval_timeout_s),
            tool_timeout_s: ol.tool_timeout_s.or(bl.tool_timeout_s),
            shell_timeout_s: ol.shell_timeout_s.or(bl.shell_timeout_s),
            max_reply_bytes: ol.max_reply_bytes.or(bl.max_reply_bytes),
            max_thinking_bytes: ol.max_thinking_bytes.or(bl.max_thinking_bytes),
            max_tool_calls: ol.max_tool_calls.or(bl.max_tool_calls),
            drain_timeout_s: ol.drain_timeout_s.or(bl.drain_timeout_s),
        },
        permissions: PermissionsSection { deny, ask },
        hooks,
        trust: TrustSection {
            projects: {
                let mut p = base.trust.projects;
                p.extend(over.trust.projects);
                p
            },
        },
        // Kept per file in `Layers::mcp` (origin matters for the gate), not merged here.
        mcp_servers: toml::Table::new(),
        checkpoints: checkpoints::CheckpointsSection::merge(base.checkpoints, over.checkpoints),
        tasks: tasks::TasksSection::merge(base.tasks, over.tasks),
        sandbox: {
            let (b, o) = (base.sandbox, over.sandbox);
            let mut env_allow = b.env_allow;
            env_allow.extend(o.env_allow);
            let mut env_deny = b.env_deny;
            env_deny.extend(o.env_deny);
            let mut writable = b.writable;
            writable.extend(o.writable);
            SandboxSection {
                mode: o.mode.or(b.mode),
                // The narrower value wins: `false` anywhere is off.
                network: match (b.network, o.network) {
                    (Some(x), Some(y)) => Some(x && y),
                    (x, y) => y.or(x),
                },
                env_allow,
                env_deny,
                writable,
                protected: o.protected.or(b.protected),
                // A later list replaces an earlier one (a project's may only be a subset).
                unix_sockets: o.unix_sockets.or(b.unix_sockets),
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn layered(user: &str, project: &str) -> Result<Layers, ConfigError> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = crate::scratch::path(&format!("config-{n}"));
        let home = dir.join("home");
        let proj = dir.join("proj");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(proj.join(".openmax")).unwrap();
        if !user.is_empty() {
            std::fs::write(home.join("config.toml"), user).unwrap();
        }
        if !project.is_empty() {
            std::fs::write(proj.join(".openmax/config.toml"), project).unwrap();
        }
        let r = load_layers(&home, &proj);
        std::fs::remove_dir_all(&dir).unwrap();
        r
    }

    #[test]
    fn each_provider_has_its_documented_model_and_output_cap_when_none_is_set() {
        let key = |k: &str| k.ends_with("_API_KEY").then(|| "sk-test".to_string());
        for (name, model, cap, window) in [
            ("anthropic", "claude-sonnet-4-5", 16_384, 200_000),
            ("openai", "gpt-5", 16_384, 400_000),
            // No cap is sent to a Chat Completions server unless one is configured.
            ("openai-chat", "gpt-4.1", 0, 128_000),
            ("demo", crate::provider::demo::MODEL, 1024, 128_000),
        ] {
            let user =
                format!("[provider]\nname = \"{name}\"\nbase_url = \"http://127.0.0.1:9/v1\"\n");
            let s = resolve(
                layered(&user, "").unwrap(),
                &Overrides::default(),
                &Overrides::default(),
                &key,
            )
            .unwrap_or_else(|e| panic!("{name}: {}", e.0));
            assert_eq!(s.provider.model, model, "{name}");
            assert_eq!(s.provider.max_output_tokens, cap, "{name}");
            assert_eq!(s.context_tokens, window, "{name}: the context window");
            let set = format!("{user}max_output_tokens = 777\ncontext_tokens = 5000\n");
            let s = resolve(
                layered(&set, "").unwrap(),
                &Overrides::default(),
                &Overrides::default(),
                &key,
            )
            .unwrap();
            assert_eq!(s.provider.max_output_tokens, 777, "{name}: a set cap wins");
            assert_eq!(s.context_tokens, 5000, "{name}: a set window wins");
        }
    }

    #[test]
    fn a_config_file_that_cannot_be_read_is_an_error_and_only_a_missing_one_is_none() {
        let dir = crate::scratch::path("config-read");
        std::fs::create_dir_all(dir.join("a-directory.toml")).unwrap();
        assert!(read_optional(&dir.join("missing.toml")).unwrap().is_none());
        let e = read_optional(&dir.join("a-directory.toml")).unwrap_err().0;
        assert!(e.contains("a-directory.toml"), "{e}");
        std::fs::write(dir.join("bad.toml"), b"x = \"\xff\"\n").unwrap();
        let e = read_optional(&dir.join("bad.toml")).unwrap_err().0;
        assert!(e.contains("not valid UTF-8"), "{e}");
        std::fs::write(dir.join("fine.toml"), "x = 1\n").unwrap();
        assert_eq!(
            read_optional(&dir.join("fine.toml")).unwrap().as_deref(),
            Some("x = 1\n")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tool_timeouts_default_parse_and_refuse_nonsense() {
        let resolve_with = |limits: &str| {
            let user = format!("[provider]\nname = \"demo\"\n[limits]\n{limits}");
            resolve(
                layered(&user, "").unwrap(),
                &Overrides::default(),
                &Overrides::default(),
                &no_env,
            )
        };
        let s = resolve_with("").unwrap();
        assert_eq!(s.tool_timeouts, ToolTimeouts::default());
        assert_eq!(s.tool_timeouts.tool_ms, 60_000);
        let s = resolve_with("tool_timeout_s = 2.5\nshell_timeout_s = 30\n").unwrap();
        assert_eq!(
            s.tool_timeouts,
            ToolTimeouts {
                tool_ms: 2500,
                shell_ms: 30_000
            }
        );
        assert!(resolve_with("tool_timeout_s = -1\n")
            .unwrap_err()
            .0
            .contains("tool_timeout_s"));
        assert!(resolve_with("shell_timeout_s = 0\n")
            .unwrap_err()
            .0
            .contains("positive"));
        assert!(resolve_with("shell_timeout_s = 7200\n")
            .unwrap_err()
            .0
            .contains("at most"));
    }

    #[test]
    fn layering_env_and_flags() {
        let l = layered(
            "[provider]\nname = \"anthropic\"\nmodel = \"a\"\nretry_base_ms = 5\n\
             [permissions]\ndeny = [\"shell(rm *)\"]\n",
            "[provider]\nmodel = \"b\"\nstream_idle_timeout_s = 0.25\n\
             [permissions]\ndeny = [\"read_file(.env)\"]\nask = [\"shell\"]\n",
        )
        .unwrap();
        let env = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "sk".to_string());
        let s = resolve(
            l.clone(),
            &Overrides::default(),
            &Overrides::default(),
            &env,
        )
        .unwrap();
        assert_eq!(s.provider.model, "b");
        assert_eq!(s.provider.api_key.as_deref(), Some("sk"));
        assert_eq!(s.retry.retry_base_ms, 5);
        assert_eq!(s.retry.stream_idle_timeout_ms, 250);
        assert_eq!(s.permissions.deny.len(), 2);
        assert_eq!(s.permissions.deny[0].tool, "shell");
        assert_eq!(s.permissions.ask.len(), 1);
        let envo = Overrides {
            model: Some("c".into()),
            ..Overrides::default()
        };
        let flags = Overrides {
            provider: Some("demo".into()),
            ..Overrides::default()
        };
        let s = resolve(l, &envo, &flags, &no_env).unwrap();
        assert_eq!(s.provider.name, "demo");
        assert_eq!(s.provider.model, "c");
        assert_eq!(s.provider.api_key, None);
    }

    #[test]
    fn errors_name_what_to_fix() {
        // The line and column of the second `=`, where the value should start.
        let e = layered("[provider]\nname = \"anthropic\"\nmodel = = 1\n", "").unwrap_err();
        assert!(e.0.contains("config.toml:3:9: broken config file"), "{e}");
        let e = layered("[provider]\nnmae = \"x\"\n", "").unwrap_err();
        assert!(e.0.contains("config.toml") && e.0.contains("nmae"), "{e}");
        let e = layered("", "[provider]\nbase_url = \"http://evil\"\n").unwrap_err();
        assert!(
            e.0.contains(".openmax/config.toml") && e.0.contains("base_url"),
            "{e}"
        );
        let e = layered("", "[provider]\napi_key_env = \"X\"\n").unwrap_err();
        assert!(e.0.contains("api_key_env"), "{e}");
        let e = layered("", "[checkpoints]\nenabled = false\n").unwrap_err();
        assert!(e.0.contains("[checkpoints] is not allowed"), "{e}");
        let e = layered("", "[trust]\nprojects = [\"/\"]\n").unwrap_err();
        assert!(e.0.contains("[trust] is not allowed"), "{e}");
        // Prices are the user's: a project naming one is refused, the user's are resolved.
        let e = layered("", "[provider]\nprice_in = 0.0\n").unwrap_err();
        assert!(
            e.0.contains(".openmax/config.toml") && e.0.contains("price_in is not allowed"),
            "{e}"
        );
        let l = layered(
            "[provider]\nname = \"demo\"\nprice_in = 3\nprice_out = 15.5\n",
            "[provider]\nmodel = \"m\"\n",
        )
        .unwrap();
        let s = resolve(l, &Overrides::default(), &Overrides::default(), &no_env).unwrap();
        let p = s.provider.prices.expect("prices");
        assert_eq!((p.input, p.output, p.cached_input), (3.0, 15.5, None));
        let l = layered(
            "[provider]\nname = \"demo\"\n[trust]\nprojects = [\"/\"]\n",
            "",
        )
        .unwrap();
        let s = resolve(l, &Overrides::default(), &Overrides::default(), &no_env).unwrap();
        assert!(s.trusts(Path::new("/")) && !s.trusts(Path::new("/tmp")));
        let l = layered("[provider]\nname = \"anthropic\"\n", "").unwrap();
        let e = resolve(l, &Overrides::default(), &Overrides::default(), &no_env).unwrap_err();
        assert!(e.0.contains("ANTHROPIC_API_KEY"), "{e}");
        let l = layered("[provider]\nname = \"nope\"\n", "").unwrap();
        let e = resolve(l, &Overrides::default(), &Overrides::default(), &no_env).unwrap_err();
        assert!(e.0.contains("openai-chat"), "{e}");
        let e = layered("[permissions]\ndeny = [\"(x)\"]\n", "")
            .and_then(|l| {
                resolve(
                    l,
                    &Overrides::default(),
                    &Overrides {
                        provider: Some("demo".into()),
                        ..Overrides::default()
                    },
                    &no_env,
                )
            })
            .unwrap_err();
        assert!(e.0.contains("deny"), "{e}");
    }

    #[test]
    fn hooks_by_origin_and_validated() {
        let l = layered(
            "[[hooks]]\nevent = \"turn_end\"\ncommand = \"./check.sh --fast\"\nblocking = true\n",
            "[[hooks]]\nevent = \"tool_end\"\ncommand = [\"sh\", \"a b.sh\"]\ntimeout_s = 0.5\n",
        )
        .unwrap();
        assert_eq!(l.hooks.len(), 2);
        assert_eq!(l.hooks[0].1, Origin::User);
        assert_eq!(l.hooks[0].0.command, vec!["./check.sh", "--fast"]);
        assert_eq!(l.hooks[1].1, Origin::Project);
        assert_eq!(l.hooks[1].0.command, vec!["sh", "a b.sh"]);
        assert_eq!(l.hooks[1].0.timeout_ms(), 500);
        // Without `timeout_s`, the documented minute.
        assert_eq!(l.hooks[0].0.timeout_ms(), 60_000);
        let e = layered(
            "",
            "[[hooks]]\nevent = \"tool_end\"\ncommand = \"x\"\nblocking = true\n",
        )
        .unwrap_err();
        assert!(
            e.0.contains(".openmax/config.toml") && e.0.contains("cannot block"),
            "{e}"
        );
        let e = layered("[[hooks]]\nevent = \"nope\"\ncommand = \"x\"\n", "").unwrap_err();
        assert!(
            e.0.contains("config.toml:2") && e.0.contains("hook event \"nope\" is not one of"),
            "{e}"
        );
    }
}

//! Which provider a session talks to, with which model, at which URL, with which key.
//!
//! The provider's name comes from the first of: `--provider`, `OPENMAX_PROVIDER`, `[provider]
//! name` in the config files; when none names one, from the vendors' own key variables, as
//! the vendors' tools read them: `ANTHROPIC_API_KEY` selects `anthropic`, `OPENAI_API_KEY`
//! selects `openai` (the Responses API). With both set, `anthropic` wins ([`FROM_KEYS`] is the
//! order) and a notice says so and how to choose.
//!
//! The base URL comes from the first of: `--base-url`, `OPENMAX_BASE_URL`, `[provider]
//! base_url` (user file only), then the vendor's variable for the chosen kind
//! (`ANTHROPIC_BASE_URL`; `OPENAI_BASE_URL` for `openai` and `openai-chat`), which replaces the
//! built-in default as it does in the vendor's SDK and CLI.
//!
//! Invariants:
//! - Nothing here reads a project file's `base_url` or key: [`super::parse_file`] refused them.
//! - The environment is the user's: a variable set in openmax's own environment, never a
//!   file in the (agent-writable) project, may redirect where the key is sent.
//! - The key is read only from the variable `api_key_env` names (or the kind's default).

use super::error::ConfigError;
use super::file::{ProviderSection, PROVIDER_NAMES};
use super::settings::Overrides;
use crate::provider::ProviderKind;
use crate::session::shown;

/// The key variables that choose a provider when nothing else does, in order of precedence.
///
/// `ANTHROPIC_API_KEY` comes first because it is the more specific signal:
/// `OPENAI_API_KEY` is commonly set for other tools, and to a placeholder for
/// OpenAI-compatible local servers (Ollama, LM Studio, vLLM), while `ANTHROPIC_API_KEY` is set
/// almost only to talk to Claude.
pub const FROM_KEYS: [(ProviderKind, &str); 2] = [
    (ProviderKind::Anthropic, "ANTHROPIC_API_KEY"),
    (ProviderKind::Openai, "OPENAI_API_KEY"),
];

/// The vendor's base-URL variable for a kind (`None` for `demo`).
pub fn vendor_base_url_var(kind: ProviderKind) -> Option<&'static str> {
    match kind {
        ProviderKind::Anthropic => Some("ANTHROPIC_BASE_URL"),
        ProviderKind::Openai | ProviderKind::OpenaiChat => Some("OPENAI_BASE_URL"),
        ProviderKind::Demo => None,
    }
}

/// The provider as chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    pub name: String,
    pub kind: ProviderKind,
    pub model: String,
    pub base_url: Option<String>,
    /// The variable the key was read from (`None` when there is no key).
    pub api_key_env: Option<String>,
    pub api_key: Option<String>,
    /// What the user should know about the choice (both vendor keys set), for stderr.
    pub notice: Option<String>,
}

/// Choose from the merged `[provider]` section, the `OPENMAX_*` overrides, the flags and the
/// environment (`env` looks a variable up; empty values count as unset).
pub fn choose(
    p: &ProviderSection,
    env_over: &Overrides,
    flags: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Chosen, ConfigError> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let mut notice = None;
    let named = flags
        .provider
        .clone()
        .or_else(|| env_over.provider.clone())
        .or(p.name.clone());
    let name = match named {
        Some(n) => n,
        None => {
            let (name, found_notice) = from_keys(&env)?;
            notice = found_notice;
            name
        }
    };
    let kind = ProviderKind::parse(&name).ok_or_else(|| {
        ConfigError(format!(
            "unknown provider {name:?}: legal providers are {}",
            PROVIDER_NAMES.join(", ")
        ))
    })?;
    let model = flags
        .model
        .clone()
        .or_else(|| env_over.model.clone())
        .or(p.model.clone())
        .unwrap_or_else(|| kind.default_model().to_string());
    let vendor_url = vendor_base_url_var(kind).and_then(|var| env(var).map(|url| (var, url)));
    let base_url = flags
        .base_url
        .clone()
        .or_else(|| env_over.base_url.clone())
        .or(p.base_url.clone())
        .or_else(|| vendor_url.as_ref().map(|(_, url)| url.clone()));
    if let Some(url) = &base_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            let from = match &vendor_url {
                Some((var, v)) if v == url => format!(" (from {var})"),
                _ => String::new(),
            };
            return Err(ConfigError(format!(
                "base_url {url:?}{from} must start with http:// or https://"
            )));
        }
    }
    let api_key_env = p
        .api_key_env
        .clone()
        .or_else(|| kind.default_api_key_env().map(str::to_string));
    let api_key = match &api_key_env {
        None => None,
        Some(var) => match env(var) {
            Some(k) => Some(k),
            None if kind.key_required() => {
                return Err(ConfigError(format!(
                    "provider {name} needs an API key: set the environment variable {var} \
                     (or point [provider] api_key_env in {} at the variable that holds it)",
                    shown("config.toml")
                )))
            }
            None => None,
        },
    };
    Ok(Chosen {
        name,
        kind,
        model,
        base_url,
        api_key_env: if api_key.is_some() { api_key_env } else { None },
        api_key,
        notice,
    })
}

/// With no provider named: the first vendor whose key variable is set (and a notice naming
/// the others when several are).
fn from_keys(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, Option<String>), ConfigError> {
    let mut notice = None;
    let found: Vec<(ProviderKind, &str)> = FROM_KEYS
        .iter()
        .copied()
        .filter(|(_, var)| env(var).is_some())
        .collect();
    let Some(&(kind, var)) = found.first() else {
        return Err(ConfigError(format!(
            "no provider configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY, or set \
             [provider] name in {}, or OPENMAX_PROVIDER, or pass --provider ({}; \
             `--provider demo` needs no key)",
            shown("config.toml"),
            PROVIDER_NAMES.join(", ")
        )));
    };
    if found.len() > 1 {
        let others: Vec<&str> = found[1..].iter().map(|(_, v)| *v).collect();
        notice = Some(format!(
            "both {var} and {} are set and no provider is configured: using {kind} \
             ({var} wins); pass --provider {} or set [provider] name in {} to choose",
            others.join(", "),
            found[1].0,
            shown("config.toml"),
        ));
    }
    Ok((kind.as_str().to_string(), notice))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn pick(
        p: &ProviderSection,
        flags: &Overrides,
        vars: &'static [(&'static str, &'static str)],
    ) -> Result<Chosen, ConfigError> {
        choose(p, &Overrides::default(), flags, &with(vars))
    }

    #[test]
    fn a_vendor_key_alone_chooses_its_provider_and_default_model() {
        let none = ProviderSection::default();
        let c = pick(
            &none,
            &Overrides::default(),
            &[("ANTHROPIC_API_KEY", "sk-a")],
        )
        .unwrap();
        assert_eq!(
            (c.kind, c.model.as_str(), c.api_key.as_deref(), c.notice),
            (
                ProviderKind::Anthropic,
                "claude-sonnet-4-5",
                Some("sk-a"),
                None
            )
        );
        let c = pick(&none, &Overrides::default(), &[("OPENAI_API_KEY", "sk-o")]).unwrap();
        assert_eq!(
            (c.kind, c.model.as_str(), c.api_key_env.as_deref()),
            (ProviderKind::Openai, "gpt-5", Some("OPENAI_API_KEY"))
        );
        // An empty variable is unset.
        let e = pick(&none, &Overrides::default(), &[("OPENAI_API_KEY", "")]).unwrap_err();
        assert!(
            e.0.contains("no provider configured") && e.0.contains("ANTHROPIC_API_KEY"),
            "{e}"
        );
    }

    #[test]
    fn both_keys_choose_anthropic_and_say_so() {
        let c = pick(
            &ProviderSection::default(),
            &Overrides::default(),
            &[("OPENAI_API_KEY", "sk-o"), ("ANTHROPIC_API_KEY", "sk-a")],
        )
        .unwrap();
        assert_eq!(c.kind, ProviderKind::Anthropic);
        let n = c.notice.expect("a notice");
        assert!(
            n.contains("ANTHROPIC_API_KEY")
                && n.contains("OPENAI_API_KEY")
                && n.contains("--provider openai"),
            "{n}"
        );
    }

    #[test]
    fn flags_env_and_config_override_the_keys() {
        let both: &'static [(&str, &str)] =
            &[("OPENAI_API_KEY", "sk-o"), ("ANTHROPIC_API_KEY", "sk-a")];
        let flags = Overrides {
            provider: Some("openai".into()),
            model: Some("gpt-5-mini".into()),
            ..Overrides::default()
        };
        let c = pick(&ProviderSection::default(), &flags, both).unwrap();
        assert_eq!(
            (c.kind, c.model.as_str(), c.notice),
            (ProviderKind::Openai, "gpt-5-mini", None)
        );
        let file = ProviderSection {
            name: Some("openai".into()),
            ..ProviderSection::default()
        };
        assert_eq!(
            pick(&file, &Overrides::default(), both).unwrap().kind,
            ProviderKind::Openai
        );
    }

    #[test]
    fn the_vendor_base_url_replaces_only_the_default() {
        let vars: &'static [(&str, &str)] = &[
            ("ANTHROPIC_API_KEY", "sk-a"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:8/v1"),
        ];
        let none = ProviderSection::default();
        let c = pick(&none, &Overrides::default(), vars).unwrap();
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:9"));
        let file = ProviderSection {
            base_url: Some("https://gateway.example".into()),
            ..ProviderSection::default()
        };
        let c = pick(&file, &Overrides::default(), vars).unwrap();
        assert_eq!(c.base_url.as_deref(), Some("https://gateway.example"));
        let flags = Overrides {
            provider: Some("openai-chat".into()),
            ..Overrides::default()
        };
        let c = pick(&none, &flags, vars).unwrap();
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:8/v1"));
        let e = pick(
            &none,
            &Overrides::default(),
            &[
                ("ANTHROPIC_API_KEY", "k"),
                ("ANTHROPIC_BASE_URL", "localhost:1"),
            ],
        )
        .unwrap_err();
        assert!(e.0.contains("ANTHROPIC_BASE_URL"), "{e}");
    }
}

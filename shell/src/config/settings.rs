//! What a session runs with once the layers, the environment and the flags are resolved
//! ([`super::resolve`]), and the overrides the environment and the flags bring.

use std::path::{Path, PathBuf};

use openmax_core::machine::{Limits, RetrySettings};
use openmax_core::permissions::Permissions;

use super::file::{HookConfig, SandboxSection};
use crate::hooks::Origin;
use crate::mcp::config::McpSource;
use crate::provider::ProviderKind;

/// Overrides from the environment or the command line (the same three keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
}

impl Overrides {
    /// `OPENMAX_PROVIDER`, `OPENMAX_MODEL`, `OPENMAX_BASE_URL` (empty values ignored).
    pub fn from_env(get: &dyn Fn(&str) -> Option<String>) -> Overrides {
        let get = |k: &str| get(k).filter(|v| !v.is_empty());
        Overrides {
            provider: get("OPENMAX_PROVIDER"),
            model: get("OPENMAX_MODEL"),
            base_url: get("OPENMAX_BASE_URL"),
        }
    }
}

/// The resolved provider settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    /// One of [`PROVIDER_NAMES`].
    pub name: String,
    pub kind: ProviderKind,
    pub model: String,
    /// `None`: the provider's default endpoint.
    pub base_url: Option<String>,
    /// The variable the key was read from (`None` when the provider needs no key).
    pub api_key_env: Option<String>,
    pub api_key: Option<String>,
    pub max_output_tokens: u64,
    /// `price_in`/`price_out`/`price_cached_in`, when set: the cost of a run is known.
    pub prices: Option<openmax_core::usage::Prices>,
}

/// Everything the session runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub provider: ProviderSettings,
    /// What the user should know about how the settings were chosen, one line each, for
    /// stderr before the session starts (no wire change).
    pub notices: Vec<String>,
    pub context_tokens: u64,
    pub retry: RetrySettings,
    pub limits: Limits,
    pub permissions: Permissions,
    /// Every `[[hooks]]` table with the file it came from (user hooks first).
    pub hooks: Vec<(HookConfig, Origin)>,
    /// The files that were read, in layer order.
    pub files: Vec<PathBuf>,
    /// `[mcp_servers]` tables by file (see [`Layers::mcp`]).
    pub mcp: Vec<McpSource>,
    /// `[trust] projects` from the user config, canonicalized where they exist.
    pub trusted_projects: Vec<PathBuf>,
    /// `[sandbox]` as merged.
    pub sandbox: SandboxSection,
    /// The built-in tools' time limits.
    pub tool_timeouts: ToolTimeouts,
    /// `[tools.web_fetch]` as merged.
    pub web: crate::tools::web_fetch::policy::WebPolicy,
    /// `[checkpoints]`: the caps of the store behind undo.
    pub checkpoints: crate::checkpoint::Caps,
    /// `[tasks]`: the limits of subagents (this session's depth is set by the caller).
    pub tasks: openmax_core::machine::TaskLimits,
}

/// `[limits] tool_timeout_s` and `shell_timeout_s`, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolTimeouts {
    /// A built-in tool other than `shell`; 0 = no limit.
    pub tool_ms: u64,
    /// A `shell` call that names no `timeout_s`.
    pub shell_ms: u64,
}

impl Default for ToolTimeouts {
    fn default() -> Self {
        ToolTimeouts {
            tool_ms: crate::tools::ToolContext::DEFAULT_TOOL_TIMEOUT_MS,
            shell_ms: crate::tools::ToolContext::DEFAULT_SHELL_TIMEOUT_MS,
        }
    }
}

impl Settings {
    /// Whether the user config trusts `project` (already canonical).
    pub fn trusts(&self, project: &Path) -> bool {
        self.trusted_projects.iter().any(|p| p == project)
    }
}

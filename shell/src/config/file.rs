//! One configuration file as written: its sections and keys (every key optional), the shape
//! serde reads and the unknown-key report ([`super::keys`]) asks for its field names.

use serde::Deserialize;

use super::{checkpoints, tasks, web_fetch};

/// The provider names `[provider] name` accepts.
pub const PROVIDER_NAMES: [&str; 4] = ["anthropic", "openai", "openai-chat", "demo"];

/// One configuration file as written (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub provider: ProviderSection,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default)]
    pub permissions: PermissionsSection,
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
    #[serde(default)]
    pub trust: TrustSection,
    /// `[mcp_servers.<name>]` as written: each entry is checked on its own by
    /// [`crate::mcp::config`], so one broken server never stops the file or the others.
    #[serde(default)]
    pub mcp_servers: toml::Table,
    #[serde(default)]
    pub sandbox: SandboxSection,
    #[serde(default)]
    pub tools: web_fetch::ToolsSection,
    #[serde(default)]
    pub checkpoints: checkpoints::CheckpointsSection,
    #[serde(default)]
    pub tasks: tasks::TasksSection,
}

/// `[sandbox]`: what processes started for the agent may see and do.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// `"on"` (default) or `"off"` (user config only).
    pub mode: Option<String>,
    /// Network sockets allowed (user config only for `true`).
    pub network: Option<bool>,
    /// Variables passed on although their names look like secrets (user config only).
    #[serde(default)]
    pub env_allow: Vec<String>,
    /// More variables withheld from agent processes.
    #[serde(default)]
    pub env_deny: Vec<String>,
    /// More directories agent processes may write beneath (user config only; absolute paths).
    #[serde(default)]
    pub writable: Vec<String>,
    /// Entries of the project agent processes may not change, relative to its root (user
    /// config only; default `.git/config`, `.git/config.worktree`, `.git/hooks/`, `.git/info/`).
    pub protected: Option<Vec<String>>,
    /// Unix sockets outside the sandbox agent processes may connect to (absolute paths). A
    /// project config may only name a subset of the user's list (removing the rest).
    pub unix_sockets: Option<Vec<String>>,
}

/// `[trust]` (user config only): projects trusted without running `openmax --trust` in them,
/// for unattended setups (CI, benchmarks, orchestrators) that prepare `$OPENMAX_HOME` ahead.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustSection {
    /// Absolute project paths (symlinks are resolved before comparing).
    #[serde(default)]
    pub projects: Vec<String>,
}

/// `[provider]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub name: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub context_tokens: Option<u64>,
    pub max_attempts: Option<u32>,
    pub retry_base_ms: Option<u64>,
    /// Seconds; fractional values are allowed (`0.2`).
    pub stream_idle_timeout_s: Option<f64>,
    pub max_output_tokens: Option<u64>,
    /// USD per million prompt tokens (user config only; [`prices`]).
    pub price_in: Option<f64>,
    /// USD per million completion tokens (user config only).
    pub price_out: Option<f64>,
    /// USD per million cached prompt tokens (user config only; default `price_in`).
    pub price_cached_in: Option<f64>,
}

/// `[limits]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    pub max_iterations: Option<u32>,
    pub max_agent_tokens: Option<u64>,
    /// Seconds; fractional values are allowed.
    pub approval_timeout_s: Option<f64>,
    /// Seconds a built-in tool other than `shell` may run; 0 = no limit.
    pub tool_timeout_s: Option<f64>,
    /// Seconds a `shell` call runs when it names no `timeout_s`.
    pub shell_timeout_s: Option<f64>,
    pub max_reply_bytes: Option<u64>,
    pub max_thinking_bytes: Option<u64>,
    pub max_tool_calls: Option<u32>,
    /// Seconds the turn in flight at shutdown may go on; fractional values are allowed.
    pub drain_timeout_s: Option<f64>,
}

/// `[permissions]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsSection {
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
}

/// One `[[hooks]]` entry (see [`crate::hooks`]).
pub use crate::hooks::HookConfig;

/// The line and column (1-based) of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let upto = &text.as_bytes()[..offset.min(text.len())];
    let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = upto.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, col)
}

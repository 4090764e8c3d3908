//! MCP servers as a tool source of the frozen set: every configured server ([`config`]) is
//! started concurrently at freeze ([`McpSet::start`]), its tools join the frozen tools as
//! `mcp__<server>__<tool>`, and calls go to it through `rmcp` ([`server`]).
//!
//! Invariants:
//! - One broken server never stops the others: a bad definition, a failed start, a missed
//!   startup timeout or a failed `initialize` is one note (`harness_note`; on stderr too where
//!   the client is a program, see [`crate::run::backend::freeze_now`]) and the session goes on
//!   without that server.
//! - A project-defined server is external code ([`gate`]): it is not started until a human
//!   approved its exact bytes (or the mode is `auto`); its calls carry a [`SourceGate`].
//! - The frozen set never changes under the model: a server's `tools/list_changed` becomes a
//!   note, and only `reload` (a new [`McpSet`]) re-lists.
//! - A call in `ask` is gated unless the server marks the tool `readOnlyHint: true` and not
//!   `destructiveHint: true`; the plan's `mutating` carries exactly that to the core.
//!
//! Frontends that bring their own server list (ACP's `mcpServers`) build [`ServerDef`]s and
//! call [`McpSet::start`]; the set then plans and runs calls like the configured ones.

pub mod claude;
pub mod codex;
pub mod config;
pub mod gate;
pub mod http;
pub mod list;
pub mod load;
pub mod resources;
pub mod result;
pub mod server;
pub mod sse;
pub mod template;

#[cfg(test)]
mod gate_tests;
#[cfg(test)]
mod naming_tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use openmax_core::conversation::ToolSchema;
use openmax_core::tool::{SourceGate, ToolOutcome, ToolPlan};

pub use config::{ServerDef, Transport};
pub use server::StartContext;

use crate::hooks::Origin;
use crate::text::{one_line, SUMMARY_CHARS};
use server::{CallFailure, Conn};

/// The prefix of every MCP tool name.
pub const PREFIX: &str = "mcp__";
/// Longest tool name the providers accept.
pub const MAX_TOOL_NAME: usize = 64;

/// One tool of one server, as frozen.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`.
    pub name: String,
    pub server: String,
    /// The server's own name for it.
    pub tool: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    /// `readOnlyHint: true` and not `destructiveHint: true`.
    pub read_only: bool,
    /// openmax's own `read_resource` tool of the server (a `resources/read`, not a
    /// `tools/call`).
    pub reader: bool,
}

impl McpTool {
    pub fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.input_schema.clone(),
        }
    }
}

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Started,
    Failed(String),
    /// A project server whose bytes no human approved (and the mode is not `auto`).
    AwaitingApproval,
    /// `enabled = false` in its definition: never started.
    Disabled,
}

/// One configured server and its connection.
pub struct Server {
    pub def: ServerDef,
    pub state: State,
    pub tools: Vec<McpTool>,
    /// Its resources and prompts, as listed at start.
    pub catalog: resources::Catalog,
    conn: tokio::sync::Mutex<Slot>,
}

struct Slot {
    conn: Option<Conn>,
    /// The server was restarted once after it died (it is not restarted again).
    restarted: bool,
    /// Why the last start failed, for a later call.
    failed: Option<String>,
    /// The names of the tools a server started by a call listed then (after its filters):
    /// nothing was planned for it at the freeze, so this list decides its calls.
    listed: Option<Vec<String>>,
}

/// The MCP servers of one freeze.
#[derive(Default)]
pub struct McpSet {
    pub servers: Vec<Arc<Server>>,
    /// Bad definitions and failed servers, worded for a note.
    pub problems: Vec<String>,
    ctx: Option<StartContext>,
}

impl McpSet {
    /// Start every server `may_start` allows, concurrently, each within its startup timeout,
    /// and list its tools. `problems` are the definition errors found while loading.
    pub fn start(
        defs: Vec<ServerDef>,
        problems: Vec<String>,
        ctx: StartContext,
        may_start: &dyn Fn(&ServerDef) -> bool,
    ) -> impl std::future::Future<Output = McpSet> + Send + 'static {
        let allowed: Vec<bool> = defs.iter().map(may_start).collect();
        Self::start_allowed(defs.into_iter().zip(allowed).collect(), problems, ctx)
    }

    async fn start_allowed(
        defs: Vec<(ServerDef, bool)>,
        mut problems: Vec<String>,
        ctx: StartContext,
    ) -> McpSet {
        let jobs = defs.into_iter().map(|(def, allowed)| {
            let ctx = ctx.clone();
            async move {
                if !def.enabled {
                    return (def, State::Disabled, Vec::new(), None, None);
                }
                if !allowed {
                    return (def, State::AwaitingApproval, Vec::new(), None, None);
                }
                match start_one(&def, &ctx).await {
                    Ok((conn, tools)) => {
                        let listed = list_catalog(&def, &conn).await;
                        (def, State::Started, tools, Some(conn), Some(listed))
                    }
                    // The server's words may hold the provider key (a user server may be
                    // given it): never in a note, a call's result or stderr.
                    Err(e) => (
                        def,
                        State::Failed(ctx.policy.redact(&e)),
                        Vec::new(),
                        None,
                        None,
                    ),
                }
            }
        });
        let started = futures::future::join_all(jobs).await;
        let mut servers = Vec::new();
        for (def, state, tools, conn, listed) in started {
            let mut unknown = Vec::new();
            let tools = filter(&def, tools, &mut unknown);
            if state == State::Started {
                problems.extend(unknown);
            }
            let (mut tools, skipped) = name_tools(&def.name, tools);
            problems.extend(skipped);
            let (catalog, listing_problem) = listed.unwrap_or_default();
            problems.extend(listing_problem);
            // The resource reader is openmax's tool, under the server's enabled_tools and
            // disabled_tools as the server's own are (named `read_resource` there).
            let reader = resources::reader_tool(&def.name, &catalog)
                .filter(|_| def.tools.allows(resources::READ_RESOURCE));
            if let Some(reader) = reader {
                if tools.iter().any(|t| t.name == reader.name) {
                    problems.push(format!(
                        "MCP server {}: its own tool {} stands; its resources are not offered \
                         as a tool",
                        def.name, reader.name
                    ));
                } else {
                    tools.push(reader);
                }
            }
            match &state {
                State::Failed(why) => problems.push(format!(
                    "MCP server {} ({}) did not start: {why}; the session goes on without it",
                    def.name, def.file
                )),
                State::AwaitingApproval => problems.push(format!(
                    "MCP server {} is defined by the project ({}) and not approved: it was not \
                     started. A human can run `openmax --approve {}`; calling one of its tools \
                     (mcp__{}__<tool>) asks for approval",
                    def.name, def.file, def.file, def.name
                )),
                State::Started | State::Disabled => {}
            }
            servers.push(Arc::new(Server {
                def,
                state,
                tools,
                catalog,
                conn: tokio::sync::Mutex::new(Slot {
                    conn,
                    restarted: false,
                    // A server that did not start is never called (its calls are refused at
                    // planning), so only a failed restart fills this.
                    failed: None,
                    listed: None,
                }),
            }));
        }
        let problems = problems.iter().map(|p| ctx.policy.redact(p)).collect();
        McpSet {
            servers,
            problems,
            ctx: Some(ctx),
        }
    }

    /// End every live connection, as a session or a freeze ends: each HTTP server's session
    /// is deleted ([`server::Conn::close`]). A call still running is waited for.
    pub fn close(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let servers: Vec<Arc<Server>> = self.servers.iter().map(Arc::clone).collect();
        async move {
            let closes = servers.iter().map(|s| async move {
                if let Some(conn) = s.conn.lock().await.conn.as_mut() {
                    conn.close().await;
                }
            });
            futures::future::join_all(closes).await;
        }
    }

    /// Every frozen tool, in server then tool order.
    pub fn tools(&self) -> impl Iterator<Item = &McpTool> {
        self.servers.iter().flat_map(|s| s.tools.iter())
    }

    /// The schemas for the freeze.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools().map(McpTool::schema).collect()
    }

    /// The server a tool name belongs to (`mcp__<server>__...`), if configured.
    pub fn server_of<'a>(&'a self, name: &'a str) -> Option<(&'a Arc<Server>, &'a str)> {
        let rest = name.strip_prefix(PREFIX)?;
        let (server, tool) = rest.split_once("__")?;
        let s = self.servers.iter().find(|s| s.def.name == server)?;
        Some((s, tool))
    }

    /// Whether `name` is this set's to plan and run.
    pub fn owns(&self, name: &str) -> bool {
        self.server_of(name).is_some()
    }

    /// Inspect a call. `approved(source_path, full_sha)` asks the approval store (and may
    /// remember the sha for a wire approval).
    pub fn plan(
        &self,
        name: &str,
        args: &serde_json::Value,
        project: &std::path::Path,
        approved: &dyn Fn(&str, &str) -> bool,
    ) -> ToolPlan {
        let mut plan = ToolPlan {
            mutating: true,
            targets: vec![args.to_string()],
            summary: one_line(&format!("{name} {args}"), SUMMARY_CHARS),
            detail: String::new(),
            source: None,
            invalid: None,
            sandbox: Default::default(),
            confirm: None,
        };
        let Some((server, tool)) = self.server_of(name) else {
            plan.invalid = Some(format!("no MCP server for {name}"));
            return plan;
        };
        if !args.is_object() {
            plan.invalid = Some(format!("arguments to {name} must be a JSON object"));
            return plan;
        }
        let frozen = server.tools.iter().find(|t| t.tool == tool);
        match &server.state {
            State::Failed(why) => {
                plan.invalid = Some(format!(
                    "MCP server {} is not running (it did not start: {why})",
                    server.def.name
                ));
                return plan;
            }
            State::Disabled => {
                plan.invalid = Some(format!(
                    "MCP server {} is disabled (enabled = false in {})",
                    server.def.name, server.def.file
                ));
                return plan;
            }
            _ if !server.def.tools.allows(tool) => {
                plan.invalid = Some(format!(
                    "MCP server {} does not offer {tool:?} (its enabled_tools / disabled_tools \
                     in {})",
                    server.def.name, server.def.file
                ));
                return plan;
            }
            State::Started if frozen.is_none() => {
                plan.invalid = Some(format!(
                    "MCP server {} has no tool {tool:?}; its tools: {}",
                    server.def.name,
                    tool_list(&server.tools)
                ));
                return plan;
            }
            _ => {}
        }
        plan.mutating = !frozen.is_some_and(|t| t.read_only);
        plan.detail = format!(
            "MCP tool {tool} of server {} ({}, {})\narguments: {args}{}",
            server.def.name,
            server.def.transport_name(),
            server.def.file,
            if plan.mutating {
                ""
            } else {
                "\nread-only (the server's readOnlyHint)"
            }
        );
        if server.def.origin == Origin::Project {
            match gate::source_sha256(&server.def, project) {
                Ok(sha) => {
                    plan.source = Some(SourceGate {
                        source_path: server.def.file.clone(),
                        source_sha: crate::extensions::source::short(&sha),
                        env: server.def.env_grant(),
                        approved: approved(&server.def.file, &sha),
                    });
                }
                Err(e) => plan.invalid = Some(format!("MCP server {}: {e}", server.def.name)),
            }
        }
        plan
    }

    /// Run a call (already planned and allowed). A project server's bytes are hashed again and
    /// must still be `planned_sha`.
    pub fn call(
        &self,
        name: &str,
        args: serde_json::Value,
        planned_sha: Option<String>,
        output_cap: usize,
        cancel: tokio::sync::oneshot::Receiver<()>,
    ) -> impl std::future::Future<Output = ToolOutcome> + Send + 'static {
        let found = self
            .server_of(name)
            .map(|(s, t)| (Arc::clone(s), t.to_string()));
        let ctx = self.ctx.clone();
        let name = name.to_string();
        async move {
            let Some((server, tool)) = found else {
                return failed(format!("no MCP server for {name}"));
            };
            let Some(ctx) = ctx else {
                return failed("MCP servers were not started".to_string());
            };
            call(&server, &tool, args, planned_sha, output_cap, &ctx, cancel).await
        }
    }
}

async fn call(
    server: &Server,
    tool: &str,
    args: serde_json::Value,
    planned_sha: Option<String>,
    output_cap: usize,
    ctx: &StartContext,
    mut cancel: tokio::sync::oneshot::Receiver<()>,
) -> ToolOutcome {
    let def = &server.def;
    if def.origin == Origin::Project {
        let now =
            gate::source_sha256(def, &ctx.project).map(|s| crate::extensions::source::short(&s));
        match (now, planned_sha) {
            (Ok(now), Some(planned)) if now == planned => {}
            (Ok(now), Some(planned)) => {
                return failed(format!(
                    "{} changed since it was approved (sha {planned} is now {now}); call the \
                     tool again to review it",
                    def.file
                ))
            }
            (Ok(_), None) => {
                return failed(format!(
                    "MCP tool of {} was not inspected before running",
                    def.name
                ))
            }
            (Err(e), _) => return failed(format!("MCP server {}: {e}", def.name)),
        }
    }
    let serde_json::Value::Object(args) = args else {
        return failed("arguments must be a JSON object".to_string());
    };
    let mut slot = server.conn.lock().await;
    let mut started_now = false;
    // Start an approved server on its first call; restart a dead one once.
    let dead = slot.conn.as_ref().is_none_or(Conn::is_closed);
    if dead {
        let first_start = slot.conn.is_none() && server.state == State::AwaitingApproval;
        if !first_start && slot.restarted {
            return failed(format!(
                "MCP server {} died and was already restarted once; run `reload` to start it \
                 again{}",
                def.name,
                slot.failed
                    .as_ref()
                    .map(|w| format!(" (last start: {w})"))
                    .unwrap_or_default()
            ));
        }
        if !first_start {
            slot.restarted = true;
        }
        slot.conn = None;
        match start_one(def, ctx).await {
            Ok((conn, tools)) => {
                if server.state == State::AwaitingApproval {
                    let tools = filter(def, tools, &mut Vec::new());
                    slot.listed = Some(tools.iter().map(|t| t.name.to_string()).collect());
                }
                slot.conn = Some(conn);
                started_now = first_start;
            }
            Err(e) => {
                slot.failed = Some(e.clone());
                return failed(format!("MCP server {} could not be started: {e}", def.name));
            }
        }
    }
    // `read_resource` is openmax's own tool, a `resources/read`, unless the server has a tool
    // of that name itself (its own then stands, as in the tool set).
    let reads_resource = match &slot.listed {
        Some(names) => {
            let its_own = names.iter().any(|n| n == tool);
            let reads = tool == resources::READ_RESOURCE && !its_own;
            if !its_own && !reads {
                return failed(format!(
                    "MCP server {} {}has no tool {tool:?}; its tools: {} (they join the tool \
                     set at the next `reload`)",
                    def.name,
                    if started_now { "started; it " } else { "" },
                    names_or_none(names.iter().map(String::as_str))
                ));
            }
            reads
        }
        None => server.tools.iter().any(|t| t.tool == tool && t.reader),
    };
    let Some(conn) = slot.conn.as_ref() else {
        return failed(format!("MCP server {} is not running", def.name));
    };
    if reads_resource {
        let uri = args.get("uri").and_then(|u| u.as_str()).unwrap_or_default();
        return match conn.read_resource(uri, def.tool_timeout_ms).await {
            Ok(r) => resources::read_outcome(&r, output_cap),
            Err(e) => failed(format!("MCP server {}: {e}", def.name)),
        };
    }
    match conn
        .call(tool, args, def.tool_timeout_ms, &mut cancel)
        .await
    {
        Ok(result) => result::outcome(&result, output_cap),
        Err(CallFailure::TimedOut(ms)) => failed(format!(
            "MCP tool {tool} of {} timed out after {ms} ms (tool_timeout_s); the call was \
             cancelled",
            def.name
        )),
        Err(CallFailure::Cancelled) => failed(format!(
            "cancelled; notifications/cancelled was sent to MCP server {}",
            def.name
        )),
        Err(CallFailure::Rpc(e)) => {
            failed(format!("MCP server {} refused the call: {e}", def.name))
        }
        Err(CallFailure::Protocol(e)) => failed(format!("MCP server {}: {e}", def.name)),
        Err(CallFailure::Transport(e)) => failed(format!(
            "MCP server {} failed during the call ({e}); it is restarted once on its next call",
            def.name
        )),
    }
}

/// A started server's resources and prompts (when it says it has them), and a note when
/// listing them failed.
async fn list_catalog(def: &ServerDef, conn: &Conn) -> (resources::Catalog, Option<String>) {
    let caps = conn.capabilities();
    let mut problem = None;
    let mut listed = |r: Result<Vec<serde_json::Value>, String>| match r {
        Ok(v) => v,
        Err(e) => {
            problem = Some(format!(
                "MCP server {}: {e}; its tools are offered",
                def.name
            ));
            Vec::new()
        }
    };
    let resources = if caps.get("resources").is_some_and(|r| !r.is_null()) {
        listed(conn.list_resources(def.startup_timeout_ms).await)
    } else {
        Vec::new()
    };
    let prompts = if caps.get("prompts").is_some_and(|p| !p.is_null()) {
        listed(conn.list_prompts(def.startup_timeout_ms).await)
    } else {
        Vec::new()
    };
    (
        resources::catalog(&def.name, &caps, &resources, &prompts),
        problem,
    )
}

/// Connect and list every page of tools, all within the startup timeout.
async fn start_one(
    def: &ServerDef,
    ctx: &StartContext,
) -> Result<(Conn, Vec<rmcp::model::Tool>), String> {
    let started = std::time::Instant::now();
    let conn = server::connect(def, ctx).await?;
    let left = def
        .startup_timeout_ms
        .saturating_sub(started.elapsed().as_millis() as u64)
        .max(1);
    let tools = conn.list_tools(left).await?;
    Ok((conn, tools))
}

/// The tools `def`'s `enabled_tools` / `disabled_tools` let through; a problem line for each
/// name `enabled_tools` gives that the server does not have (a typo would silently offer
/// nothing).
fn filter(
    def: &ServerDef,
    tools: Vec<rmcp::model::Tool>,
    problems: &mut Vec<String>,
) -> Vec<rmcp::model::Tool> {
    if let Some(wanted) = &def.tools.enabled {
        for w in wanted
            .iter()
            .filter(|w| *w != resources::READ_RESOURCE && !tools.iter().any(|t| t.name == **w))
        {
            problems.push(format!(
                "{}: MCP server {}: enabled_tools names {w:?}, which the server does not offer",
                def.file, def.name
            ));
        }
    }
    tools
        .into_iter()
        .filter(|t| def.tools.allows(&t.name))
        .collect()
}

/// The frozen tools of one server, and a problem line for each tool whose name cannot be used.
fn name_tools(server: &str, tools: Vec<rmcp::model::Tool>) -> (Vec<McpTool>, Vec<String>) {
    let mut out: BTreeMap<String, McpTool> = BTreeMap::new();
    let mut problems = Vec::new();
    for t in tools {
        let full = format!("{PREFIX}{server}__{}", t.name);
        let ok_chars = t
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if t.name.is_empty() || !ok_chars || full.len() > MAX_TOOL_NAME {
            problems.push(format!(
                "MCP server {server}: tool {:?} skipped: {full} must be at most {MAX_TOOL_NAME} \
                 letters, digits, '_' or '-'",
                t.name
            ));
            continue;
        }
        let read_only = t
            .annotations
            .as_ref()
            .is_some_and(|a| a.read_only_hint == Some(true) && a.destructive_hint != Some(true));
        let mut schema = serde_json::Value::Object((*t.input_schema).clone());
        if schema.get("type").is_none() {
            schema["type"] = "object".into();
        }
        out.insert(
            full.clone(),
            McpTool {
                name: full,
                server: server.to_string(),
                tool: t.name.to_string(),
                description: t
                    .description
                    .map(|d| d.to_string())
                    .or(t.title)
                    .unwrap_or_else(|| format!("{} (MCP server {server})", t.name)),
                input_schema: schema,
                read_only,
                reader: false,
            },
        );
    }
    (out.into_values().collect(), problems)
}

fn tool_list(tools: &[McpTool]) -> String {
    names_or_none(tools.iter().map(|t| t.tool.as_str()))
}

/// `names` joined with commas, or `none`.
fn names_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        return "none".to_string();
    }
    names.join(", ")
}

fn failed(output: String) -> ToolOutcome {
    ToolOutcome {
        ok: false,
        output,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

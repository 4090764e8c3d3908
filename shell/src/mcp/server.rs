//! One connection to one MCP server through `rmcp`: start it (a stdio child in its own process
//! group, streamable HTTP, or the older HTTP+SSE), `initialize` within the startup timeout,
//! list every page of its tools, call a tool with cancel and timeout, and restart it once after
//! it died.
//!
//! Invariants:
//! - A stdio server gets PATH, HOME, LANG, the variables its definition names and
//!   `OPENMAX_AGENT_SESSION`, nothing else of openmax's environment; its stderr goes to the
//!   session's MCP log; its whole process group is killed when the connection is dropped, and
//!   is tracked by the reaper meanwhile (spawned under the reaper's spawn lock), so the sweep
//!   after another tool's call spares it and a later openmax kills it if this one was killed.
//! - A server the project defines is code from the repository: it starts in the session's
//!   kernel sandbox, like the `shell` tool (writes only in the project and the temp
//!   directories, never under `$OPENMAX_HOME`; network as `[sandbox] network` says), and is not
//!   started at all when the sandbox is unavailable. A server the user's own config defines is
//!   the user's code and runs outside it, as user hooks do.
//! - A cancelled or timed-out call sends `notifications/cancelled` for its request id.
//! - A server whose transport closed fails the call in flight; the next call restarts it once.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult, Tool as RmcpTool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::mpsc;

use super::config::{EnvValue, ServerDef, Transport};
use super::template;
use crate::extensions::external::BASE_ENV;
use crate::extensions::process::kill_group;
use crate::hooks::Origin;

/// Where a server runs and reports.
#[derive(Debug, Clone)]
pub struct StartContext {
    pub project: PathBuf,
    /// The session's MCP log: every stdio server's stderr is appended there.
    pub log_path: Option<PathBuf>,
    /// Exported as `OPENMAX_AGENT_SESSION`.
    pub agent_session: String,
    /// Notices (a server's `tools/list_changed`) for the session, as note text.
    pub notices: Option<mpsc::UnboundedSender<String>>,
    /// The session's policy for agent processes: project servers start in its sandbox, and
    /// every server's process group is tracked in its running directory.
    pub policy: crate::sandbox::Policy,
}

/// The client side's handler: it only turns `tools/list_changed` into a notice.
#[derive(Clone)]
pub struct Handler {
    server: String,
    notices: Option<mpsc::UnboundedSender<String>>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        if let Some(tx) = &self.notices {
            let _ = tx.send(format!(
                "MCP server {} says its tools changed; the tool set stays frozen until `reload`, \
                 which will pick the change up",
                self.server
            ));
        }
        std::future::ready(())
    }
}

/// A live connection.
pub struct Conn {
    service: RunningService<RoleClient, Handler>,
    /// The stdio child's process group (killed on drop).
    pgid: Option<i32>,
    _child: Option<tokio::process::Child>,
    /// Keeps the group out of the reaper's sweep after other tools' calls: a server lives as
    /// long as its connection, not one call.
    _tracked: Option<crate::sandbox::reaper::Tracked>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        kill_group(self.pgid);
    }
}

impl Conn {
    /// End a connection over HTTP: `rmcp`'s worker deletes the server's session (the DELETE the
    /// protocol asks of a client that is done with it, within its own timeout). A stdio
    /// server's process group is killed when the connection is dropped, as ever.
    pub async fn close(&mut self) {
        if self.pgid.is_none() {
            let _ = self.service.close().await;
        }
    }

    /// Whether the server is gone (its transport closed).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Every page of `tools/list`.
    pub async fn list_tools(&self, timeout_ms: u64) -> Result<Vec<RmcpTool>, String> {
        match tokio::time::timeout(
            Duration::from_millis(timeout_ms),
            self.service.peer().list_all_tools(),
        )
        .await
        {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => Err(format!("tools/list failed: {e}")),
            Err(_) => Err(format!("tools/list took longer than {timeout_ms} ms")),
        }
    }

    /// What the server said it offers at `initialize` (`{"tools":…,"resources":…,…}`).
    pub fn capabilities(&self) -> serde_json::Value {
        self.service
            .peer()
            .peer_info()
            .and_then(|i| serde_json::to_value(i).ok())
            .and_then(|v| v.get("capabilities").cloned())
            .unwrap_or_default()
    }

    /// Every page of `resources/list`, each resource as JSON.
    pub async fn list_resources(&self, timeout_ms: u64) -> Result<Vec<serde_json::Value>, String> {
        let all = self.service.peer().list_all_resources();
        match tokio::time::timeout(Duration::from_millis(timeout_ms), all).await {
            Ok(Ok(r)) => Ok(r
                .iter()
                .filter_map(|x| serde_json::to_value(x).ok())
                .collect()),
            Ok(Err(e)) => Err(format!("resources/list failed: {e}")),
            Err(_) => Err(format!("resources/list took longer than {timeout_ms} ms")),
        }
    }

    /// Every page of `prompts/list`, each prompt as JSON.
    pub async fn list_prompts(&self, timeout_ms: u64) -> Result<Vec<serde_json::Value>, String> {
        let all = self.service.peer().list_all_prompts();
        match tokio::time::timeout(Duration::from_millis(timeout_ms), all).await {
            Ok(Ok(p)) => Ok(p
                .iter()
                .filter_map(|x| serde_json::to_value(x).ok())
                .collect()),
            Ok(Err(e)) => Err(format!("prompts/list failed: {e}")),
            Err(_) => Err(format!("prompts/list took longer than {timeout_ms} ms")),
        }
    }

    /// `resources/read` of `uri`: the result as JSON.
    pub async fn read_resource(
        &self,
        uri: &str,
        timeout_ms: u64,
    ) -> Result<serde_json::Value, String> {
        let params: rmcp::model::ReadResourceRequestParams =
            serde_json::from_value(serde_json::json!({ "uri": uri })).map_err(|e| e.to_string())?;
        let read = self.service.peer().read_resource(params);
        match tokio::time::timeout(Duration::from_millis(timeout_ms), read).await {
            Ok(Ok(r)) => serde_json::to_value(r).map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(format!("resources/read of {uri} failed: {e}")),
            Err(_) => Err(format!(
                "resources/read of {uri} took longer than {timeout_ms} ms"
            )),
        }
    }

    /// `prompts/get` of `name` with `arguments`: the result as JSON.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        timeout_ms: u64,
    ) -> Result<serde_json::Value, String> {
        let params: rmcp::model::GetPromptRequestParams =
            serde_json::from_value(serde_json::json!({ "name": name, "arguments": arguments }))
                .map_err(|e| e.to_string())?;
        let get = self.service.peer().get_prompt(params);
        match tokio::time::timeout(Duration::from_millis(timeout_ms), get).await {
            Ok(Ok(r)) => serde_json::to_value(r).map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(format!("prompts/get of {name} failed: {e}")),
            Err(_) => Err(format!(
                "prompts/get of {name} took longer than {timeout_ms} ms"
            )),
        }
    }

    /// `tools/call`: the result as JSON, or why there is none.
    pub async fn call(
        &self,
        tool: &str,
        args: serde_json::Map<String, serde_json::Value>,
        timeout_ms: u64,
        cancel: &mut tokio::sync::oneshot::Receiver<()>,
    ) -> Result<serde_json::Value, CallFailure> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(args);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut handle = self
            .service
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| CallFailure::Transport(innermost(&e)))?;
        let timeout = tokio::time::sleep(Duration::from_millis(timeout_ms));
        tokio::pin!(timeout);
        let reason = tokio::select! {
            r = &mut handle.rx => {
                return match r {
                    Ok(Ok(ServerResult::CallToolResult(result))) => serde_json::to_value(result)
                        .map_err(|e| CallFailure::Protocol(e.to_string())),
                    Ok(Ok(other)) => Err(CallFailure::Protocol(format!(
                        "the server answered tools/call with something else: {other:?}"
                    ))),
                    Ok(Err(e)) => Err(classify(e)),
                    Err(_) => Err(CallFailure::Transport("the connection closed".into())),
                };
            }
            _ = &mut timeout => CallFailure::TimedOut(timeout_ms),
            _ = cancel => CallFailure::Cancelled,
        };
        let why = match &reason {
            CallFailure::TimedOut(ms) => format!("timed out after {ms} ms"),
            _ => "cancelled by the user".to_string(),
        };
        let _ = handle.cancel(Some(why)).await;
        Err(reason)
    }
}

/// Why a call has no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// The server is gone (died, closed its pipes, the HTTP session ended).
    Transport(String),
    /// The server answered with a JSON-RPC error (bad arguments, unknown tool).
    Rpc(String),
    /// The answer made no sense.
    Protocol(String),
    TimedOut(u64),
    Cancelled,
}

fn classify(e: rmcp::ServiceError) -> CallFailure {
    match e {
        rmcp::ServiceError::McpError(err) => {
            CallFailure::Rpc(format!("{} (code {})", err.message, err.code.0))
        }
        other => CallFailure::Transport(innermost(&other)),
    }
}

/// The message of the innermost error `e` wraps: `rmcp` wraps a transport's own error in two
/// layers that name its Rust types, which say nothing to a user.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut e = e;
    while let Some(source) = e.source() {
        e = source;
    }
    e.to_string()
}

/// Start a server and run `initialize` within its startup timeout.
pub async fn connect(def: &ServerDef, ctx: &StartContext) -> Result<Conn, String> {
    let handler = Handler {
        server: def.name.clone(),
        notices: ctx.notices.clone(),
    };
    let budget = Duration::from_millis(def.startup_timeout_ms);
    match &def.transport {
        Transport::Stdio { command, args } => {
            use std::os::unix::process::CommandExt;
            // A project server is project code: it runs in the session's sandbox; a user
            // server is the user's own and runs outside it.
            let how = match def.origin {
                Origin::Project => openmax_core::tool::RunSandbox::Session,
                Origin::User => openmax_core::tool::RunSandbox::Unsandboxed,
            };
            let mut vars = environment(def);
            vars.push(("OPENMAX_AGENT_SESSION".into(), ctx.agent_session.clone()));
            let dir = def.cwd.clone().unwrap_or_else(|| ctx.project.clone());
            if !dir.is_dir() {
                return Err(format!("its cwd {} is not a directory", dir.display()));
            }
            let mut std_cmd = ctx
                .policy
                .command_as(command, &dir, &vars, how)
                .map_err(|why| {
                    format!("not started: a project server runs only in the sandbox, and {why}")
                })?;
            std_cmd
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(log_stdio(ctx, &def.name))
                .process_group(0);
            let mut cmd = tokio::process::Command::from(std_cmd);
            cmd.kill_on_drop(true);
            let (mut child, pgid, tracked) = {
                let _spawning = crate::sandbox::reaper::spawning();
                let child = cmd
                    .spawn()
                    .map_err(|e| format!("could not start {command}: {e}"))?;
                let pgid = child.id().map(|p| p as i32);
                let tracked = pgid.map(|g| ctx.policy.track(g));
                (child, pgid, tracked)
            };
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                kill_group(pgid);
                return Err("could not open the server's stdin/stdout".into());
            };
            match tokio::time::timeout(budget, handler.serve((stdout, stdin))).await {
                Ok(Ok(service)) => Ok(Conn {
                    service,
                    pgid,
                    _child: Some(child),
                    _tracked: tracked,
                }),
                Ok(Err(e)) => {
                    kill_group(pgid);
                    let status = child.try_wait().ok().flatten();
                    Err(match status {
                        Some(s) => format!("initialize failed ({e}); the server exited: {s}"),
                        None => format!("initialize failed: {e}"),
                    })
                }
                Err(_) => {
                    kill_group(pgid);
                    Err(format!(
                        "no answer to initialize within the startup timeout ({} ms)",
                        def.startup_timeout_ms
                    ))
                }
            }
        }
        Transport::Http {
            url,
            bearer_token_env,
            headers,
            env_headers,
        } => {
            let bearer = bearer_token_env.as_deref().and_then(|k| forwarded(def, k));
            let headers = request_headers(def, headers, env_headers);
            let transport = super::http::transport(url, bearer, &headers)?;
            remote(def, budget, handler.serve(transport)).await
        }
        Transport::Sse { url, headers } => {
            let transport = super::sse::connect(url, &request_headers(def, headers, &[]), budget)
                .await
                .map_err(|e| format!("the SSE event stream did not open: {e}"))?;
            remote(def, budget, handler.serve(transport)).await
        }
    }
}

/// Header values with their `${VAR}`s expanded.
/// The headers of a remote server's requests: its literal ones (`${VAR}` expanded), then
/// each `env_http_headers` header whose variable is set and not empty.
fn request_headers(
    def: &ServerDef,
    headers: &[(String, String)],
    env_headers: &[(String, String)],
) -> Vec<(String, String)> {
    let get = |k: &str| forwarded(def, k);
    let mut out: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                template::expand(v, &get, false).unwrap_or_default(),
            )
        })
        .collect();
    for (name, var) in env_headers {
        if let Some(v) = get(var).filter(|v| !v.is_empty()) {
            out.push((name.clone(), v));
        }
    }
    out
}

/// `initialize` over a remote transport, within the startup budget.
async fn remote<E: std::fmt::Display>(
    def: &ServerDef,
    budget: Duration,
    serving: impl std::future::Future<Output = Result<RunningService<RoleClient, Handler>, E>>,
) -> Result<Conn, String> {
    match tokio::time::timeout(budget, serving).await {
        Ok(Ok(service)) => Ok(Conn {
            service,
            pgid: None,
            _child: None,
            _tracked: None,
        }),
        Ok(Err(e)) => Err(format!("initialize failed: {e}")),
        Err(_) => Err(format!(
            "no answer to initialize within the startup timeout ({} ms)",
            def.startup_timeout_ms
        )),
    }
}

/// The stdio server's environment: PATH, HOME, LANG when set, then its definition's variables.
pub fn environment(def: &ServerDef) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = BASE_ENV
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.to_string(), v)))
        .collect();
    for (name, value) in &def.env {
        match value {
            EnvValue::Literal(v) => env.push((name.clone(), v.clone())),
            EnvValue::Forward(from) => {
                if let Some(v) = forwarded(def, from) {
                    env.push((name.clone(), v));
                }
            }
            EnvValue::Template(t) => {
                let get = |k: &str| forwarded(def, k);
                env.push((
                    name.clone(),
                    template::expand(t, &get, false).unwrap_or_default(),
                ));
            }
        }
    }
    env
}

/// A variable of openmax's environment forwarded to a server: a user server may be given the
/// provider's key (taken out of openmax's environment block at start-up), a project server
/// never (its definition may not even name it: [`super::config::Lookup::check`]).
fn forwarded(def: &ServerDef, name: &str) -> Option<String> {
    match def.origin {
        Origin::User => crate::sandbox::scrub::var(name),
        Origin::Project => std::env::var(name).ok(),
    }
}

fn log_stdio(ctx: &StartContext, server: &str) -> Stdio {
    let Some(path) = &ctx.log_path else {
        return Stdio::null();
    };
    if let Some(dir) = path.parent() {
        let _ = crate::session::perms::private_dir_all(dir);
    }
    match crate::session::perms::private_file()
        .create(true)
        .append(true)
        .open(path)
    {
        Ok(mut f) => {
            use std::io::Write;
            let _ = writeln!(f, "--- mcp server {server} started");
            Stdio::from(f)
        }
        Err(_) => Stdio::null(),
    }
}

/// A shared, restartable connection.
pub type Shared = Arc<tokio::sync::Mutex<Option<Conn>>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn def(env: &[(&str, EnvValue)]) -> ServerDef {
        let mut d = ServerDef::new(
            "s",
            Transport::Stdio {
                command: "srv".into(),
                args: vec![],
            },
            Origin::Project,
            ".openmax/config.toml",
            String::new(),
        );
        d.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        d
    }

    /// A transport failure is worded by its innermost cause: the layers `rmcp` wraps around
    /// it name Rust types, not what went wrong.
    #[test]
    fn a_failure_is_worded_by_its_innermost_cause() {
        #[derive(Debug)]
        struct Layer(&'static str, Box<dyn std::error::Error + 'static>);
        impl std::fmt::Display for Layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Layer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(self.1.as_ref())
            }
        }
        let cause = std::io::Error::other("the server closed the connection");
        let two = Layer(
            "Transport(Client(..))",
            Box::new(Layer("Client(..)", Box::new(cause))),
        );
        assert_eq!(innermost(&two), "the server closed the connection");
        let alone = std::io::Error::other("timed out");
        assert_eq!(innermost(&alone), "timed out");
    }

    #[test]
    fn header_values_expand_their_variables_and_an_env_header_is_sent_only_with_a_value() {
        let path = std::env::var("PATH").expect("PATH is set for tests");
        let headers = [
            ("X-Static".to_string(), "v 1".to_string()),
            ("X-Path".to_string(), "p=${PATH}".to_string()),
            (
                "X-Default".to_string(),
                "${OPENMAX_TEST_SURELY_UNSET_VARIABLE:-none}".to_string(),
            ),
        ];
        let empty = "OPENMAX_TEST_EMPTY_HEADER_VARIABLE";
        std::env::set_var(empty, "");
        let env_headers = [
            ("X-Env-Path".to_string(), "PATH".to_string()),
            (
                "X-Unset".to_string(),
                "OPENMAX_TEST_SURELY_UNSET_VARIABLE".to_string(),
            ),
            ("X-Empty".to_string(), empty.to_string()),
        ];
        assert_eq!(
            request_headers(&def(&[]), &headers, &env_headers),
            [
                ("X-Static".to_string(), "v 1".to_string()),
                ("X-Path".to_string(), format!("p={path}")),
                ("X-Default".to_string(), "none".to_string()),
                ("X-Env-Path".to_string(), path),
            ]
        );
    }

    #[test]
    fn a_stdio_server_gets_the_base_variables_then_its_own() {
        let unset = "OPENMAX_TEST_SURELY_UNSET_VARIABLE";
        assert!(std::env::var(unset).is_err());
        let path = std::env::var("PATH").expect("PATH is set for tests");
        let env = environment(&def(&[
            ("A_LITERAL", EnvValue::Literal("one two".into())),
            ("A_FORWARD", EnvValue::Forward("PATH".into())),
            ("NOT_FORWARDED", EnvValue::Forward(unset.into())),
            (
                "A_TEMPLATE",
                EnvValue::Template(format!("${{{unset}:-fallback}}:${{PATH}}")),
            ),
        ]));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("PATH"), Some(path.as_str()));
        for base in BASE_ENV {
            assert_eq!(get(base), std::env::var(base).ok().as_deref(), "{base}");
        }
        assert_eq!(get("A_LITERAL"), Some("one two"));
        assert_eq!(get("A_FORWARD"), Some(path.as_str()));
        assert_eq!(
            get("NOT_FORWARDED"),
            None,
            "an unset variable is left unset"
        );
        assert_eq!(get("A_TEMPLATE"), Some(format!("fallback:{path}").as_str()));
        // Nothing else of openmax's environment leaks in.
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        for n in &names {
            assert!(
                BASE_ENV.contains(n) || n.starts_with("A_"),
                "unexpected variable {n}"
            );
        }
    }
}

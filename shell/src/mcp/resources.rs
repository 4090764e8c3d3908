//! MCP resources and prompts. Resources are offered to the model as one tool per server that
//! has any, `mcp__<server>__read_resource` (the MCP spec leaves how a host exposes resources
//! to the host; a tool is how the model can ask for one, as Claude Code and Codex do with
//! their resource tools): its description lists the server's resources (the first
//! [`LISTED`]) and its templates, and a call is a `resources/read` of the `uri` it names.
//! The terminal UI also reads a resource for an `@server:uri` mention and turns a server's
//! prompts into `/mcp__<server>__<prompt>` commands (`prompts/get`).
//!
//! Invariants: listing resources and prompts is part of a server's start, under its startup
//! timeout, and a server that fails to list them keeps its tools (a note says so); the
//! `read_resource` tool is read-only (no `ask` gate in `ask` mode, allowed in `readonly`);
//! a resource's text is capped like any tool output, binary contents are summarised, an image
//! content goes to the model as an image.

use openmax_core::tool::ToolOutcome;
use serde_json::{json, Value};

use super::{McpTool, Server, PREFIX};

/// The name of the resource tool's server-side part.
pub const READ_RESOURCE: &str = "read_resource";
/// Resources named in the tool's description at most.
pub const LISTED: usize = 50;

/// One resource a server listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    pub description: String,
}

/// One prompt a server listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptInfo {
    pub server: String,
    pub name: String,
    pub description: String,
    /// Its arguments: name, required.
    pub args: Vec<(String, bool)>,
}

impl PromptInfo {
    /// The terminal UI's command for it, without the slash.
    pub fn command(&self) -> String {
        format!("{PREFIX}{}__{}", self.server, self.name)
    }
}

/// What a server offers besides tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// The server said it has resources (`capabilities.resources`).
    pub has_resources: bool,
    pub resources: Vec<ResourceInfo>,
    pub prompts: Vec<PromptInfo>,
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The catalog from a server's listings.
pub fn catalog(server: &str, caps: &Value, resources: &[Value], prompts: &[Value]) -> Catalog {
    Catalog {
        has_resources: caps.get("resources").is_some_and(|r| !r.is_null()),
        resources: resources
            .iter()
            .map(|r| ResourceInfo {
                uri: str_at(r, "uri").to_string(),
                name: str_at(r, "name").to_string(),
                description: str_at(r, "description").to_string(),
            })
            .filter(|r| !r.uri.is_empty())
            .collect(),
        prompts: prompts
            .iter()
            .map(|p| PromptInfo {
                server: server.to_string(),
                name: str_at(p, "name").to_string(),
                description: str_at(p, "description").to_string(),
                args: p
                    .get("arguments")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        (
                            str_at(a, "name").to_string(),
                            a.get("required").and_then(Value::as_bool).unwrap_or(false),
                        )
                    })
                    .collect(),
            })
            .filter(|p| {
                !p.name.is_empty()
                    && p.name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
            .collect(),
    }
}

/// The `mcp__<server>__read_resource` tool of a server with resources.
pub fn reader_tool(server: &str, cat: &Catalog) -> Option<McpTool> {
    if !cat.has_resources && cat.resources.is_empty() {
        return None;
    }
    let mut description = format!(
        "Read a resource of the MCP server {server} by its URI (resources/read) and return its \
         contents."
    );
    if !cat.resources.is_empty() {
        description.push_str(" Its resources:");
        for r in cat.resources.iter().take(LISTED) {
            description.push_str(&format!("\n- {} ({})", r.uri, r.name));
            if !r.description.is_empty() {
                let d: String = r.description.chars().take(100).collect();
                description.push_str(&format!(": {d}"));
            }
        }
        if cat.resources.len() > LISTED {
            description.push_str(&format!(
                "\n… and {} more; any URI the server has can be read.",
                cat.resources.len() - LISTED
            ));
        }
    }
    Some(McpTool {
        name: format!("{PREFIX}{server}__{READ_RESOURCE}"),
        server: server.to_string(),
        tool: READ_RESOURCE.to_string(),
        description,
        input_schema: json!({
            "type": "object",
            "properties": {
                "uri": {"type": "string", "description": "The resource's URI, as listed."}
            },
            "required": ["uri"],
            "additionalProperties": false
        }),
        read_only: true,
        reader: true,
    })
}

/// A `resources/read` result as text for the model (`[resource uri (type)]` then the text of
/// each content; binary contents summarised; images kept as images), capped at `cap` bytes.
pub fn read_outcome(result: &Value, cap: usize) -> ToolOutcome {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    for c in result
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let uri = str_at(c, "uri");
        let mime = str_at(c, "mimeType");
        match (
            c.get("text").and_then(Value::as_str),
            c.get("blob").and_then(Value::as_str),
        ) {
            (Some(text), _) => parts.push(format!(
                "[resource {uri}{}]\n{text}",
                if mime.is_empty() {
                    String::new()
                } else {
                    format!(" ({mime})")
                }
            )),
            (None, Some(blob)) => {
                let bytes = crate::images::decode(blob).unwrap_or_default();
                match crate::images::from_bytes(uri, &bytes) {
                    Ok(img) => {
                        parts.push(format!("[resource {uri}: {} follows]", img.describe()));
                        images.push(img);
                    }
                    Err(_) => parts.push(format!(
                        "[resource {uri}: binary, {}, {} bytes: not shown]",
                        if mime.is_empty() { "no type" } else { mime },
                        bytes.len()
                    )),
                }
            }
            (None, None) => parts.push(format!("[resource {uri}: empty]")),
        }
    }
    let mut output = parts.join("\n");
    if output.len() > cap {
        let mut cut = cap;
        while !output.is_char_boundary(cut) {
            cut -= 1;
        }
        output.truncate(cut);
        output.push_str(&format!("\n[output cut at {cap} bytes]"));
    }
    ToolOutcome {
        ok: true,
        output,
        diffs: Vec::new(),
        images,
    }
}

/// The text (and images) a `prompts/get` result makes: each message's text in order, an
/// embedded resource by its text.
pub fn prompt_text(result: &Value) -> (String, Vec<openmax_core::conversation::Image>) {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    for m in result
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let c = m.get("content").cloned().unwrap_or_default();
        match str_at(&c, "type") {
            "text" => parts.push(str_at(&c, "text").to_string()),
            "image" => {
                let bytes = crate::images::decode(str_at(&c, "data")).unwrap_or_default();
                if let Ok(img) = crate::images::from_bytes("prompt image", &bytes) {
                    images.push(img);
                }
            }
            "resource" => {
                let r = c.get("resource").cloned().unwrap_or_default();
                parts.push(format!(
                    "<resource uri=\"{}\">\n{}\n</resource>",
                    str_at(&r, "uri"),
                    str_at(&r, "text")
                ));
            }
            _ => {}
        }
    }
    (parts.join("\n\n"), images)
}

/// Read `uri` from `server` over its live connection (for a mention).
pub async fn read(server: &Server, uri: &str) -> Result<Value, String> {
    let slot = server.conn.lock().await;
    let conn = slot
        .conn
        .as_ref()
        .ok_or_else(|| format!("MCP server {} is not running", server.def.name))?;
    conn.read_resource(uri, server.def.tool_timeout_ms).await
}

/// `prompts/get` of `name` from `server` over its live connection.
pub async fn get(
    server: &Server,
    name: &str,
    args: serde_json::Map<String, Value>,
) -> Result<Value, String> {
    let slot = server.conn.lock().await;
    let conn = slot
        .conn
        .as_ref()
        .ok_or_else(|| format!("MCP server {} is not running", server.def.name))?;
    conn.get_prompt(name, args, server.def.tool_timeout_ms)
        .await
}

impl super::McpSet {
    /// Every prompt of every started server.
    pub fn prompts(&self) -> Vec<PromptInfo> {
        self.servers
            .iter()
            .flat_map(|s| s.catalog.prompts.iter().cloned())
            .collect()
    }

    fn server(&self, name: &str) -> Result<std::sync::Arc<Server>, String> {
        self.servers
            .iter()
            .find(|s| s.def.name == name)
            .cloned()
            .ok_or_else(|| {
                let names: Vec<&str> = self.servers.iter().map(|s| s.def.name.as_str()).collect();
                format!(
                    "no MCP server named {name:?} (servers: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )
            })
    }

    /// The text of the resource `uri` of `server` (an `@server:uri` mention), fenced by its
    /// URI, and its images.
    pub fn mention(
        &self,
        server: &str,
        uri: &str,
    ) -> impl std::future::Future<
        Output = Result<(String, Vec<openmax_core::conversation::Image>), String>,
    > + Send
           + 'static {
        let found = self.server(server);
        let (name, uri) = (server.to_string(), uri.to_string());
        async move {
            let s = found?;
            let r = read(&s, &uri).await?;
            let out = read_outcome(&r, usize::MAX);
            Ok((
                format!(
                    "<resource server=\"{name}\" uri=\"{}\">\n{}\n</resource>",
                    uri.replace('"', "%22"),
                    out.output
                ),
                out.images,
            ))
        }
    }

    /// The prompt `command` (`mcp__<server>__<prompt>`) with `words` as its arguments
    /// (`key=value`, or bare values taken in the prompt's argument order): its text and images.
    pub fn expand_prompt(
        &self,
        command: &str,
        words: &[String],
    ) -> Result<
        impl std::future::Future<
                Output = Result<(String, Vec<openmax_core::conversation::Image>), String>,
            > + Send
            + 'static,
        String,
    > {
        let prompts = self.prompts();
        let Some(p) = prompts.iter().find(|p| p.command() == command) else {
            let all: Vec<String> = prompts
                .iter()
                .map(|p| format!("/{}", p.command()))
                .collect();
            return Err(format!(
                "unknown command /{command}: the MCP prompts are {}",
                if all.is_empty() {
                    "none".to_string()
                } else {
                    all.join(", ")
                }
            ));
        };
        let args = bind(p, words)?;
        let server = self.server(&p.server)?;
        let name = p.name.clone();
        Ok(async move {
            let r = get(&server, &name, args).await?;
            Ok(prompt_text(&r))
        })
    }
}

/// A prompt's arguments from the words after its command: `key=value` for one of its
/// arguments, else the next of its arguments not given yet, in order; every required one must
/// be there.
fn bind(p: &PromptInfo, words: &[String]) -> Result<serde_json::Map<String, Value>, String> {
    let command = p.command();
    let mut args = serde_json::Map::new();
    let mut positional = p.args.iter().map(|(n, _)| n.clone());
    for w in words {
        match w.split_once('=') {
            Some((k, v)) if p.args.iter().any(|(n, _)| n == k) => {
                args.insert(k.to_string(), Value::String(v.to_string()));
            }
            _ => match positional.by_ref().find(|n| !args.contains_key(n)) {
                Some(n) => {
                    args.insert(n, Value::String(w.clone()));
                }
                None => {
                    return Err(format!(
                        "/{command} takes {}; {w:?} is one too many",
                        usage(p)
                    ))
                }
            },
        }
    }
    if let Some((missing, _)) = p.args.iter().find(|(n, req)| *req && !args.contains_key(n)) {
        return Err(format!("/{command} needs {missing}: it takes {}", usage(p)));
    }
    Ok(args)
}

/// `temperature=<value> [style=<value>]`.
fn usage(p: &PromptInfo) -> String {
    if p.args.is_empty() {
        return "no arguments".to_string();
    }
    p.args
        .iter()
        .map(|(n, req)| {
            if *req {
                format!("{n}=<value>")
            } else {
                format!("[{n}=<value>]")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_words_bind_by_name_then_in_order_and_required_ones_must_be_there() {
        let p = PromptInfo {
            server: "s".into(),
            name: "p".into(),
            description: String::new(),
            args: vec![("temperature".into(), true), ("style".into(), false)],
        };
        let bound = |words: &[&str]| {
            bind(&p, &words.iter().map(|w| w.to_string()).collect::<Vec<_>>()).map(Value::Object)
        };
        assert_eq!(
            bound(&["style=terse", "hot"]).unwrap(),
            json!({"style": "terse", "temperature": "hot"})
        );
        assert_eq!(
            bound(&["cold", "wordy"]).unwrap(),
            json!({"temperature": "cold", "style": "wordy"})
        );
        // `k=v` for a name the prompt does not have is a value like any other.
        assert_eq!(bound(&["x=1"]).unwrap(), json!({"temperature": "x=1"}));
        assert_eq!(
            bound(&["temperature=a=b"]).unwrap(),
            json!({"temperature": "a=b"})
        );
        let e = bound(&["style=terse"]).unwrap_err();
        assert_eq!(
            e,
            "/mcp__s__p needs temperature: it takes temperature=<value> [style=<value>]"
        );
        let e = bound(&["a", "b", "c"]).unwrap_err();
        assert!(e.ends_with("\"c\" is one too many"), "{e}");
        let none = PromptInfo {
            args: vec![],
            ..p.clone()
        };
        assert_eq!(
            bind(&none, &["x".into()]).unwrap_err(),
            "/mcp__s__p takes no arguments; \"x\" is one too many"
        );
    }

    #[test]
    fn a_long_resource_is_cut_on_a_character_boundary_at_the_cap() {
        let text = "é".repeat(10); // 20 bytes
        let r = json!({"contents": [{"uri": "u://x", "text": text}]});
        let whole = read_outcome(&r, usize::MAX).output;
        assert_eq!(whole, format!("[resource u://x]\n{text}"));
        // Exactly at the cap it is whole.
        assert_eq!(read_outcome(&r, whole.len()).output, whole);
        // A cap in the middle of a character cuts before it.
        let cap = "[resource u://x]\n".len() + 5;
        let out = read_outcome(&r, cap).output;
        assert_eq!(
            out,
            format!(
                "[resource u://x]\n{}\n[output cut at {cap} bytes]",
                "é".repeat(2)
            )
        );
    }

    #[test]
    fn a_catalog_becomes_a_read_resource_tool_and_prompt_commands() {
        let cat = catalog(
            "everything",
            &json!({"resources": {}, "prompts": {}}),
            &[json!({"uri": "demo://a", "name": "A", "description": "the first"})],
            &[
                json!({"name": "complex_prompt", "description": "d", "arguments": [
                {"name": "temperature", "required": true}, {"name": "style"}]}),
                json!({"name": "bad name"}),
            ],
        );
        let t = reader_tool("everything", &cat).unwrap();
        assert_eq!(t.name, "mcp__everything__read_resource");
        assert!(t.read_only && t.reader);
        assert!(t.description.contains("- demo://a (A): the first"));
        assert_eq!(cat.prompts.len(), 1);
        assert_eq!(cat.prompts[0].command(), "mcp__everything__complex_prompt");
        assert_eq!(
            cat.prompts[0].args,
            [
                ("temperature".to_string(), true),
                ("style".to_string(), false)
            ]
        );
        assert!(reader_tool("x", &Catalog::default()).is_none());
    }

    /// The tool's description lists the first `LISTED` resources and counts the rest; a
    /// catalog of exactly `LISTED` has nothing more to count.
    #[test]
    fn the_description_lists_the_first_resources_and_counts_the_rest() {
        let described = |n: usize| {
            let resources: Vec<_> = (0..n)
                .map(|i| json!({"uri": format!("demo://{i}"), "name": format!("r{i}")}))
                .collect();
            let cat = catalog("s", &json!({"resources": {}}), &resources, &[]);
            reader_tool("s", &cat).unwrap().description
        };
        let all = described(LISTED);
        assert!(all.contains(&format!("- demo://{} (r{})", LISTED - 1, LISTED - 1)));
        assert!(!all.contains("more;"), "{all}");
        let more = described(LISTED + 2);
        assert!(more.contains(&format!("- demo://{} (r{})", LISTED - 1, LISTED - 1)));
        assert!(!more.contains(&format!("demo://{LISTED} ")), "{more}");
        assert!(
            more.ends_with("\n… and 2 more; any URI the server has can be read."),
            "{more}"
        );
    }

    #[test]
    fn read_and_prompt_results_become_text() {
        let out = read_outcome(
            &json!({"contents": [{"uri": "demo://a", "mimeType": "text/plain", "text": "hello"},
                                 {"uri": "demo://b", "blob": "AAEC", "mimeType": "application/octet-stream"}]}),
            1000,
        );
        assert_eq!(
            out.output,
            "[resource demo://a (text/plain)]\nhello\n[resource demo://b: binary, application/octet-stream, 3 bytes: not shown]"
        );
        let (text, images) = prompt_text(&json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "Write a haiku"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "demo://a", "text": "hi"}}}
        ]}));
        assert_eq!(
            text,
            "Write a haiku\n\n<resource uri=\"demo://a\">\nhi\n</resource>"
        );
        assert!(images.is_empty());
    }
}

//! Every unknown key of a configuration file, found in one pass, each with its line and the
//! keys accepted where it stands, so a file with three typos is fixed in one edit rather than
//! three runs. Also the line of any key ([`Lines`]), for messages about MCP server entries.
//!
//! Invariants:
//! - The accepted keys have one home: the `Deserialize` structs themselves. [`fields_of`] asks
//!   a struct for its field names (the list serde's derive passes to `deserialize_struct`), so
//!   a new field is accepted here the moment it exists.
//! - A file that does not parse as TOML is not judged here: the caller reports the syntax
//!   error with its position first.

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use super::checkpoints::CheckpointsSection;
use super::file::{FileConfig, HookConfig, LimitsSection, PermissionsSection, ProviderSection};
use super::file::{SandboxSection, TrustSection};
use super::web_fetch::{ToolsSection, WebFetchSection};

/// The field names of a `Deserialize` struct (empty for anything else).
pub fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let mut found = None;
    let _ = T::deserialize(FieldProbe(&mut found));
    found.unwrap_or(&[])
}

/// The keys accepted in a section, by its path from the top (`[]`, `["limits"]`, `["hooks"]`
/// for each `[[hooks]]` table). `None`: the section's keys are free (`[mcp_servers]` names
/// servers; their entries are judged by [`crate::mcp::config`]).
fn accepted(section: &[&str]) -> Option<&'static [&'static str]> {
    Some(match section {
        [] => fields_of::<FileConfig>(),
        ["provider"] => fields_of::<ProviderSection>(),
        ["limits"] => fields_of::<LimitsSection>(),
        ["permissions"] => fields_of::<PermissionsSection>(),
        ["trust"] => fields_of::<TrustSection>(),
        ["sandbox"] => fields_of::<SandboxSection>(),
        ["hooks"] => fields_of::<HookConfig>(),
        ["tools"] => fields_of::<ToolsSection>(),
        ["tools", "web_fetch"] => fields_of::<WebFetchSection>(),
        ["checkpoints"] => fields_of::<CheckpointsSection>(),
        ["tasks"] => fields_of::<super::tasks::TasksSection>(),
        _ => return None,
    })
}

/// One line per unknown key of `text` (the file at `path`), in file order:
/// `path:line: [limits] max_iteration: unknown key (the keys of [limits] are …)`.
pub fn unknown(path: &Path, text: &str) -> Vec<String> {
    let Ok(root) = toml::from_str::<Node>(text) else {
        return Vec::new();
    };
    let mut found: Vec<(usize, String)> = Vec::new();
    check(&root, &mut Vec::new(), None, text, path, &mut found);
    found.sort_by_key(|(at, _)| *at);
    found.into_iter().map(|(_, line)| line).collect()
}

fn check(
    node: &Node,
    section: &mut Vec<String>,
    item: Option<usize>,
    text: &str,
    path: &Path,
    found: &mut Vec<(usize, String)>,
) {
    let Node::Table(entries) = node else { return };
    let (keys, shown, top) = {
        let names: Vec<&str> = section.iter().map(String::as_str).collect();
        let Some(keys) = accepted(&names) else { return };
        let shown = match (names.as_slice(), item) {
            ([], _) => "the top level".to_string(),
            (_, Some(i)) => format!("[[{}]] #{}", names.join("."), i + 1),
            _ => format!("[{}]", names.join(".")),
        };
        (keys, shown, names.is_empty())
    };
    for (key, value) in entries {
        let name = key.get_ref();
        if keys.contains(&name.as_str()) {
            section.push(name.clone());
            match value {
                Node::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        check(v, section, Some(i), text, path, found);
                    }
                }
                v => check(v, section, None, text, path, found),
            }
            section.pop();
            continue;
        }
        let at = key.span().start;
        let (line, _) = super::file::line_col(text, at);
        let what = if top {
            "the sections and keys here are"
        } else {
            "the keys accepted there are"
        };
        found.push((
            at,
            format!(
                "{}:{line}: {shown}: unknown key {name:?} ({what}: {})",
                path.display(),
                keys.join(", ")
            ),
        ));
    }
}

/// The line of every key of a TOML document, by its path (`["mcp_servers", "x", "args"]`; an
/// array item is `#0`, `#1`, …).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lines(BTreeMap<Vec<String>, usize>);

impl Lines {
    /// The lines of `text` (empty when it does not parse).
    pub fn of(text: &str) -> Lines {
        let mut out = BTreeMap::new();
        if let Ok(root) = toml::from_str::<Node>(text) {
            collect(&root, &mut Vec::new(), text, &mut out);
        }
        Lines(out)
    }

    /// The line of the key at `path`.
    pub fn get(&self, path: &[&str]) -> Option<usize> {
        let key: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        self.0.get(&key).copied()
    }
}

fn collect(node: &Node, at: &mut Vec<String>, text: &str, out: &mut BTreeMap<Vec<String>, usize>) {
    match node {
        Node::Table(entries) => {
            for (key, value) in entries {
                at.push(key.get_ref().clone());
                out.insert(at.clone(), super::file::line_col(text, key.span().start).0);
                collect(value, at, text, out);
                at.pop();
            }
        }
        Node::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                at.push(format!("#{i}"));
                collect(v, at, text, out);
                at.pop();
            }
        }
        Node::Leaf => {}
    }
}

/// A TOML document's shape: tables with their keys' spans, arrays, and leaves.
enum Node {
    Table(Vec<(Spanned<String>, Node)>),
    Array(Vec<Node>),
    Leaf,
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_str<E>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(n) = seq.next_element::<Node>()? {
            items.push(n);
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<Spanned<String>>()? {
            entries.push((k, map.next_value::<Node>()?));
        }
        Ok(Node::Table(entries))
    }
}

/// A deserializer that only records the field list a struct asks for.
struct FieldProbe<'a>(&'a mut Option<&'static [&'static str]>);

#[derive(Debug)]
struct Probed;

impl std::fmt::Display for Probed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names probed")
    }
}

impl std::error::Error for Probed {}

impl de::Error for Probed {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Probed
    }
}

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Probed> {
        *self.0 = Some(fields);
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_from_the_structs() {
        assert!(fields_of::<LimitsSection>().contains(&"max_iterations"));
        assert!(fields_of::<FileConfig>().contains(&"mcp_servers"));
        assert!(fields_of::<HookConfig>().contains(&"timeout_s"));
        assert!(fields_of::<String>().is_empty());
    }

    #[test]
    fn every_unknown_key_at_once_with_its_line() {
        let text = "\
[provider]
name = \"demo\"
nmae = \"x\"

[limits]
max_iteration = 5
max_iterations = 5

[[hooks]]
event = \"turn_end\"
command = \"x\"
timeout = 3

[mcp_servers.anything]
whatever = 1

[limitz]
";
        let found = unknown(Path::new("/h/config.toml"), text);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(found[0].starts_with("/h/config.toml:3: [provider]: unknown key \"nmae\""));
        assert!(found[0].contains("model, base_url"), "{}", found[0]);
        assert!(found[1].starts_with("/h/config.toml:6: [limits]: unknown key \"max_iteration\""));
        assert!(found[2].starts_with("/h/config.toml:12: [[hooks]] #1: unknown key \"timeout\""));
        assert!(found[2].contains("timeout_s"), "{}", found[2]);
        assert!(found[3].starts_with("/h/config.toml:17: the top level: unknown key \"limitz\""));
        assert!(unknown(Path::new("c"), "[limits]\nmax_iterations = 3\n").is_empty());
        assert!(unknown(Path::new("c"), "not toml [").is_empty());
    }

    #[test]
    fn lines_of_nested_keys() {
        let text = "[mcp_servers.a]\ncommand = \"x\"\n\n[mcp_servers.a.env]\nK = \"v\"\n";
        let lines = Lines::of(text);
        assert_eq!(lines.get(&["mcp_servers", "a", "command"]), Some(2));
        assert_eq!(lines.get(&["mcp_servers", "a", "env", "K"]), Some(5));
        assert_eq!(lines.get(&["mcp_servers", "b"]), None);
    }
}

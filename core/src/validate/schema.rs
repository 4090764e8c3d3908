//! The JSON Schema (draft 2020-12) of every command and every stdout line, and a checker for
//! the subset of JSON Schema it uses.
//!
//! [`stdio_schema`] is generated from the same tables the validator reads —
//! [`EVENT_FIELDS`], [`COMMAND_FIELDS`] and the handshake and `refrozen.changes` tables in
//! [`super::line`] — so the schema, the validator and the serde types cannot drift.
//! [`check`] validates a JSON value against a schema written in the subset generated here:
//! `$ref` (local `#/$defs/…`), `type`, `const`, `enum`, `properties`, `required`,
//! `additionalProperties: false`, `items`, `oneOf`, `minimum`, `minLength`, `maxLength`,
//! `minItems` and `pattern` of the form `^[0-9a-f]{N}$`. Annotations are ignored.
//!
//! The schema states shapes; ordering rules across lines are the stream validator's.

use serde_json::{json, Map, Value};

use super::line::{
    FREEZE_CHANGE_BY, FREEZE_CHANGE_CHANGES, FREEZE_CHANGE_FIELDS, FREEZE_CHANGE_KINDS,
    TRANSCRIPT_ROLES,
};
use crate::wire::command::COMMAND_FIELDS;
use crate::wire::event::{FieldSpec, FieldType, EVENT_FIELDS};
use crate::wire::handshake::TRANSCRIPT_MESSAGE_CHARS;
use crate::wire::StopReason;
use crate::wire::{PROTO, PROTOCOL_VERSION};

/// The schema's `$id`.
pub const SCHEMA_ID: &str = "urn:openmax:openmax-stdio:6";

/// The whole schema: a line is either a command (`#/$defs/command`) or a stdout line
/// (`#/$defs/stdout_line`); each variant is also addressable as `#/$defs/cmd_<name>`,
/// `#/$defs/hello`, `#/$defs/transcript` or `#/$defs/event_<type>`.
pub fn stdio_schema() -> Value {
    let mut defs = Map::new();
    let mut commands = Vec::new();
    for spec in COMMAND_FIELDS {
        let mut props = Map::new();
        props.insert("cmd".into(), json!({ "const": spec.cmd }));
        let mut required = vec![json!("cmd")];
        for f in spec.fields {
            props.insert(f.name.into(), field_schema(f));
            required.push(json!(f.name));
        }
        let name = format!("cmd_{}", spec.cmd);
        defs.insert(
            name.clone(),
            json!({
                "type": "object",
                "description": "A client command. Extra fields are ignored.",
                "properties": props,
                "required": required,
            }),
        );
        commands.push(json!({ "$ref": format!("#/$defs/{name}") }));
    }
    defs.insert(
        "command".into(),
        json!({ "description": "One stdin line.", "oneOf": commands }),
    );

    let mut lines = vec![
        json!({"$ref": "#/$defs/hello"}),
        json!({"$ref": "#/$defs/transcript"}),
    ];
    defs.insert("hello".into(), hello_schema());
    defs.insert("transcript".into(), transcript_schema());
    defs.insert("freeze_change".into(), freeze_change_schema());
    for spec in EVENT_FIELDS {
        let mut props = Map::new();
        let mut required = Vec::new();
        if spec.has_session_id {
            props.insert("session_id".into(), json!({ "type": "string" }));
            required.push(json!("session_id"));
        }
        props.insert("type".into(), json!({ "const": spec.type_name }));
        required.push(json!("type"));
        for f in spec.fields {
            let mut fs = field_schema(f);
            refine(spec.type_name, f.name, &mut fs);
            props.insert(f.name.into(), fs);
            if f.required {
                required.push(json!(f.name));
            }
        }
        let mut schema = json!({
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": false,
        });
        if spec.type_name == "approval_request" {
            // One line rule the schema can state: the source fields follow the reason.
            schema["oneOf"] = json!([
                {
                    "properties": {
                        "reason": { "const": "gate" },
                        "source_path": { "const": "" },
                        "source_sha": { "const": "" }
                    }
                },
                {
                    "properties": {
                        "reason": { "const": "unapproved_source" },
                        "source_path": { "minLength": 1 },
                        "source_sha": { "pattern": "^[0-9a-f]{12}$" }
                    }
                }
            ]);
        }
        let name = format!("event_{}", spec.type_name);
        defs.insert(name.clone(), schema);
        lines.push(json!({ "$ref": format!("#/$defs/{name}") }));
    }
    defs.insert(
        "stdout_line".into(),
        json!({ "description": "One stdout line: hello, transcript, or an event.", "oneOf": lines }),
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": PROTO,
        "description": "Every line of openmax's stdio protocol: commands on stdin, hello, transcript and events on stdout. Ordering rules across lines are checked by `openmax --check --stdio`, not by this schema.",
        "oneOf": [ { "$ref": "#/$defs/command" }, { "$ref": "#/$defs/stdout_line" } ],
        "$defs": defs,
    })
}

/// Check `value` against the sub-schema `def` of [`stdio_schema`] (e.g. `"stdout_line"`,
/// `"command"`), or against the whole schema when `def` is empty.
pub fn check_against(root: &Value, def: &str, value: &Value) -> Result<(), String> {
    let schema = if def.is_empty() {
        root
    } else {
        root.pointer(&format!("/$defs/{def}"))
            .ok_or_else(|| format!("no $defs/{def} in the schema"))?
    };
    check(root, schema, value, "$")
}

/// Check `value` against `schema` (whose `$ref`s resolve in `root`). `Err` names the first
/// failing location and keyword.
pub fn check(root: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return match schema {
            Value::Bool(true) => Ok(()),
            _ => Err(format!("{at}: schema is false or not an object")),
        };
    };
    for (key, arg) in s {
        match key.as_str() {
            "$ref" => {
                let r = arg.as_str().unwrap_or("");
                let target = r
                    .strip_prefix('#')
                    .and_then(|p| root.pointer(p))
                    .ok_or_else(|| format!("{at}: unresolvable $ref {r:?}"))?;
                check(root, target, value, at)?;
            }
            "type" => {
                let ok = match arg {
                    Value::String(t) => is_type(value, t),
                    Value::Array(ts) => ts.iter().any(|t| is_type(value, t.as_str().unwrap_or(""))),
                    _ => false,
                };
                if !ok {
                    return Err(format!("{at}: not of type {arg}"));
                }
            }
            "const" if value != arg => return Err(format!("{at}: is not {arg}")),
            "enum" if !arg.as_array().is_some_and(|a| a.contains(value)) => {
                return Err(format!("{at}: is not one of {arg}"));
            }
            "properties" => {
                if let (Some(props), Some(obj)) = (arg.as_object(), value.as_object()) {
                    for (name, sub) in props {
                        if let Some(v) = obj.get(name) {
                            check(root, sub, v, &format!("{at}.{name}"))?;
                        }
                    }
                }
            }
            "required" => {
                if let (Some(req), Some(obj)) = (arg.as_array(), value.as_object()) {
                    for name in req.iter().filter_map(Value::as_str) {
                        if !obj.contains_key(name) {
                            return Err(format!("{at}: required property {name:?} is missing"));
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let (Value::Bool(false), Some(obj)) = (arg, value.as_object()) {
                    let props = s.get("properties").and_then(Value::as_object);
                    for name in obj.keys() {
                        if !props.is_some_and(|p| p.contains_key(name)) {
                            return Err(format!("{at}: property {name:?} is not allowed"));
                        }
                    }
                }
            }
            "items" => {
                if let Some(items) = value.as_array() {
                    for (i, v) in items.iter().enumerate() {
                        check(root, arg, v, &format!("{at}[{i}]"))?;
                    }
                }
            }
            "oneOf" => {
                let options = arg.as_array().map(Vec::as_slice).unwrap_or(&[]);
                let passing = options
                    .iter()
                    .filter(|o| check(root, o, value, at).is_ok())
                    .count();
                if passing != 1 {
                    return Err(format!(
                        "{at}: matches {passing} of the {} oneOf options, not exactly one",
                        options.len()
                    ));
                }
            }
            "minimum" => {
                if let (Some(n), Some(min)) = (value.as_f64(), arg.as_f64()) {
                    if n < min {
                        return Err(format!("{at}: {n} is below the minimum {min}"));
                    }
                }
            }
            "minLength" | "maxLength" => {
                if let (Some(t), Some(bound)) = (value.as_str(), arg.as_u64()) {
                    let len = t.chars().count() as u64;
                    if (key == "minLength" && len < bound) || (key == "maxLength" && len > bound) {
                        return Err(format!("{at}: length {len} breaks {key} {bound}"));
                    }
                }
            }
            "minItems" => {
                if let (Some(a), Some(min)) = (value.as_array(), arg.as_u64()) {
                    if (a.len() as u64) < min {
                        return Err(format!("{at}: fewer than {min} items"));
                    }
                }
            }
            "pattern" => {
                if let Some(t) = value.as_str() {
                    let p = arg.as_str().unwrap_or("");
                    let n = p
                        .strip_prefix("^[0-9a-f]{")
                        .and_then(|r| r.strip_suffix("}$"))
                        .and_then(|n| n.parse::<usize>().ok())
                        .ok_or_else(|| format!("{at}: unsupported pattern {p:?}"))?;
                    let ok = t.len() == n
                        && t.bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
                    if !ok {
                        return Err(format!("{at}: {t:?} does not match {p}"));
                    }
                }
            }
            // Annotations and keywords already handled with their siblings.
            _ => {}
        }
    }
    Ok(())
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        _ => false,
    }
}

/// The schema of one field from its table entry.
fn field_schema(f: &FieldSpec) -> Value {
    let mut s = match f.ty {
        FieldType::String => json!({ "type": "string" }),
        FieldType::Bool => json!({ "type": "boolean" }),
        FieldType::UInt => json!({ "type": "integer", "minimum": 0 }),
        FieldType::UIntOrNull => json!({ "type": ["integer", "null"], "minimum": 0 }),
        FieldType::Object => json!({ "type": "object" }),
        FieldType::StringArray => json!({ "type": "array", "items": { "type": "string" } }),
        FieldType::ChangeArray => {
            json!({ "type": "array", "items": { "$ref": "#/$defs/freeze_change" } })
        }
    };
    if !f.values.is_empty() {
        s["enum"] = json!(f.values);
    }
    s
}

/// One-line value rules the schema can state, by event type and field.
fn refine(type_name: &str, field: &str, s: &mut Value) {
    match (type_name, field) {
        ("done", "stop_reason") => {
            s["minLength"] = json!(1);
            s["description"] = json!(format!(
                "One of {} or a provider finish reason passed through verbatim (a normal end).",
                StopReason::NAMED.map(|r| r.as_str().to_string()).join(", ")
            ));
        }
        ("tool_start" | "tool_end" | "diff", "call_id")
        | ("approval_request" | "approval_settled", "approval_id") => {
            s["minLength"] = json!(1);
        }
        ("approval_request", "env") => s["minItems"] = json!(1),
        ("retry", "attempt") => s["minimum"] = json!(2),
        ("retry", "max_attempts") => s["minimum"] = json!(2),
        _ => {}
    }
}

fn hello_schema() -> Value {
    json!({
        "type": "object",
        "description": "The first stdout line.",
        "properties": {
            "type": { "const": "hello" },
            "proto": { "const": PROTO },
            "protocol_version": { "const": PROTOCOL_VERSION },
            "session_id": { "type": "string", "minLength": 1 },
            "version": { "type": "string" },
            "project": { "type": "string" },
            "continued": { "type": "boolean" }
        },
        "required": super::line::HELLO_FIELDS,
        "additionalProperties": false,
    })
}

fn transcript_schema() -> Value {
    json!({
        "type": "object",
        "description": "The second stdout line, only when hello.continued is true.",
        "properties": {
            "type": { "const": "transcript" },
            "session_id": { "type": "string" },
            "messages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "role": { "enum": TRANSCRIPT_ROLES },
                        "content": { "type": "string", "maxLength": TRANSCRIPT_MESSAGE_CHARS }
                    },
                    "required": ["role", "content"],
                    "additionalProperties": false
                }
            },
            "truncated": { "type": "boolean" }
        },
        "required": super::line::TRANSCRIPT_FIELDS,
        "additionalProperties": false,
    })
}

fn freeze_change_schema() -> Value {
    json!({
        "type": "object",
        "description": "One entry of a refrozen receipt: what changed and who changed it.",
        "properties": {
            "kind": { "enum": FREEZE_CHANGE_KINDS },
            "name": { "type": "string" },
            "change": { "enum": FREEZE_CHANGE_CHANGES },
            "path": { "type": "string" },
            "by": { "enum": FREEZE_CHANGE_BY }
        },
        "required": FREEZE_CHANGE_FIELDS,
        "additionalProperties": false,
    })
}

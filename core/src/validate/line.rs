//! Per-line shape checks: one stdout line on its own, with no memory of the stream.
//!
//! A line is well formed when it is one JSON object with a known `type`, every field the
//! contract lists for that type is present with the right JSON type, no other field is present,
//! enumerated values are legal, and `session_id` is present exactly on the types that carry it.
//! The field lists come from [`EVENT_FIELDS`]; `hello` and `transcript` (not events) are checked
//! here by hand against their fixed shapes in [`crate::wire::handshake`].
//!
//! Invariant: [`check_line`] returns `Ok` only for a line that deserializes into the typed
//! [`Parsed`] value, so the stream rules never see a malformed line.

use serde_json::{Map, Value};

use crate::wire::command::COMMAND_NAMES;
use crate::wire::event::{event_spec, Event, FieldSpec, FieldType, EVENT_FIELDS};
use crate::wire::handshake::{TRANSCRIPT_CONTENT_BYTES, TRANSCRIPT_MESSAGE_CHARS};
use crate::wire::{PROTO, PROTOCOL_VERSION};

/// openmax's values for `refrozen.changes[].kind` (the contract leaves them open).
pub const FREEZE_CHANGE_KINDS: [&str; 4] = ["tool", "skill", "prompt", "hook"];
/// openmax's values for `refrozen.changes[].change`.
pub const FREEZE_CHANGE_CHANGES: [&str; 3] = ["added", "removed", "changed"];
/// openmax's values for `refrozen.changes[].by`.
pub const FREEZE_CHANGE_BY: [&str; 2] = ["agent", "outside"];
/// The fields of one `refrozen.changes[]` entry, in wire order.
pub const FREEZE_CHANGE_FIELDS: [&str; 5] = ["kind", "name", "change", "path", "by"];
/// The fields of `hello`, in wire order.
pub const HELLO_FIELDS: [&str; 7] = [
    "type",
    "proto",
    "protocol_version",
    "session_id",
    "version",
    "project",
    "continued",
];
/// The fields of `transcript`, in wire order.
pub const TRANSCRIPT_FIELDS: [&str; 4] = ["type", "session_id", "messages", "truncated"];
/// Legal `transcript.messages[].role` values: user and assistant text only.
pub const TRANSCRIPT_ROLES: [&str; 2] = ["user", "assistant"];

/// A well-formed line, reduced to what the stream rules need.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// A `hello` line.
    Hello {
        /// Its session id.
        session_id: String,
        /// Whether it continues an earlier session.
        continued: bool,
    },
    /// A `transcript` line.
    Transcript {
        /// Its session id.
        session_id: String,
    },
    /// An event; `session_id` is `None` exactly for the session-less types.
    Event {
        /// The event's session id.
        session_id: Option<String>,
        /// The event.
        event: Event,
    },
}

impl Parsed {
    /// The `type` as written on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            Parsed::Hello { .. } => "hello",
            Parsed::Transcript { .. } => "transcript",
            Parsed::Event { event, .. } => event.type_name(),
        }
    }
}

/// Check one line (already known to be UTF-8). `Err` lists every problem found, each in plain
/// words without a line number.
pub fn check_line(text: &str) -> Result<Parsed, Vec<String>> {
    if text.trim().is_empty() {
        return Err(vec![
            "blank line: every stdout line must be one JSON object".to_string(),
        ]);
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Err(vec![format!("not valid JSON ({e})")]),
    };
    let Value::Object(mut obj) = value else {
        return Err(vec![format!(
            "not a JSON object (found {})",
            json_kind(&value)
        )]);
    };
    let type_name = match obj.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(vec![format!(
                "\"type\" must be a string, found {}",
                json_kind(other)
            )])
        }
        None if obj.contains_key("cmd") => {
            return Err(vec![
                "has \"cmd\" and no \"type\": this is a client command, not a stdout line"
                    .to_string(),
            ])
        }
        None => return Err(vec!["no \"type\" field".to_string()]),
    };
    match type_name.as_str() {
        "hello" => check_hello(&obj),
        "transcript" => check_transcript(&obj),
        _ => {
            let Some(spec) = event_spec(&type_name) else {
                let mut msg = format!(
                    "unknown type {type_name:?}; known types: hello, transcript, {}",
                    EVENT_FIELDS
                        .iter()
                        .map(|s| s.type_name)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if COMMAND_NAMES.contains(&type_name.as_str()) {
                    msg.push_str(" (that is a command name; commands go on stdin as \"cmd\")");
                }
                return Err(vec![msg]);
            };
            let mut problems = Vec::new();
            if obj.contains_key("cmd") {
                problems.push(
                    "carries \"cmd\": commands go on stdin, events never carry it".to_string(),
                );
            }
            check_session_field(&obj, &type_name, spec.has_session_id, &mut problems);
            check_fields(&obj, &type_name, spec.fields, &mut problems);
            if problems.is_empty() {
                check_values(&obj, &type_name, &mut problems);
            }
            if !problems.is_empty() {
                return Err(problems);
            }
            let session_id = match obj.remove("session_id") {
                Some(Value::String(s)) => Some(s),
                // check_session_field accepted the line, so session_id is a string or absent.
                _ => None,
            };
            match serde_json::from_value::<Event>(Value::Object(obj)) {
                Ok(event) => Ok(Parsed::Event { session_id, event }),
                Err(e) => Err(vec![format!("does not match the {type_name} shape ({e})")]),
            }
        }
    }
}

/// The JSON kind of a value, for messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "a non-negative integer",
        Value::Number(n) if n.is_i64() => "a negative integer",
        Value::Number(_) => "a fractional number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What a field type must look like, for messages.
pub fn expected_kind(ty: FieldType) -> &'static str {
    match ty {
        FieldType::String => "a string",
        FieldType::Bool => "true or false",
        FieldType::UInt => "a non-negative integer",
        FieldType::UIntOrNull => "a non-negative integer or null",
        FieldType::Object => "an object",
        FieldType::StringArray => "an array of strings",
        FieldType::ChangeArray => "an array of {kind, name, change, path, by} objects",
    }
}

/// Whether `v` has the JSON type `ty` (enumerations aside).
pub fn has_type(v: &Value, ty: FieldType) -> bool {
    match ty {
        FieldType::String => v.is_string(),
        FieldType::Bool => v.is_boolean(),
        FieldType::UInt => v.is_u64(),
        FieldType::UIntOrNull => v.is_null() || v.is_u64(),
        FieldType::Object => v.is_object(),
        FieldType::StringArray => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        FieldType::ChangeArray => v.as_array().is_some_and(|a| a.iter().all(Value::is_object)),
    }
}

/// Whether `s` is exactly 12 lowercase hex digits (a `source_sha`).
pub fn is_short_sha(s: &str) -> bool {
    s.len() == 12
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn check_session_field(
    obj: &Map<String, Value>,
    type_name: &str,
    has_session_id: bool,
    problems: &mut Vec<String>,
) {
    // Contract: "Every event line carries the flattened session_id ... Only two lines carry no
    // session_id: protocol_error and the approval_mode acknowledgement."
    match (obj.get("session_id"), has_session_id) {
        (Some(Value::String(_)), true) | (None, false) => {}
        (Some(other), true) => problems.push(format!(
            "\"session_id\" must be a string, found {}",
            json_kind(other)
        )),
        (None, true) => problems.push(format!("{type_name} line has no \"session_id\" field")),
        (Some(_), false) => problems.push(format!(
            "{type_name} line carries \"session_id\"; it is one of the two session-less lines"
        )),
    }
}

fn check_fields(
    obj: &Map<String, Value>,
    type_name: &str,
    fields: &[FieldSpec],
    problems: &mut Vec<String>,
) {
    for key in obj.keys() {
        let known = key == "type" || key == "session_id" || key == "cmd";
        if !known && !fields.iter().any(|f| f.name == key) {
            problems.push(format!("unknown field {key:?} on a {type_name} line"));
        }
    }
    for spec in fields {
        match obj.get(spec.name) {
            None if spec.required => {
                problems.push(format!("{type_name} line has no {:?} field", spec.name))
            }
            None => {}
            Some(v) if !has_type(v, spec.ty) => problems.push(format!(
                "{type_name}.{} must be {}, found {}",
                spec.name,
                expected_kind(spec.ty),
                json_kind(v)
            )),
            Some(v) => {
                if let (false, Some(s)) = (spec.values.is_empty(), v.as_str()) {
                    if !spec.values.contains(&s) {
                        problems.push(format!(
                            "{type_name}.{} {s:?} is not one of {}",
                            spec.name,
                            spec.values.join(", ")
                        ));
                    }
                }
                if spec.ty == FieldType::ChangeArray {
                    check_changes(v, problems);
                }
            }
        }
    }
}

/// `refrozen.changes`: openmax's shape, since the contract says only "what changed and who".
fn check_changes(v: &Value, problems: &mut Vec<String>) {
    let Some(items) = v.as_array() else { return };
    for (i, item) in items.iter().enumerate() {
        let Some(o) = item.as_object() else { continue };
        for key in o.keys() {
            if !FREEZE_CHANGE_FIELDS.contains(&key.as_str()) {
                problems.push(format!("unknown field {key:?} in refrozen.changes[{i}]"));
            }
        }
        for name in FREEZE_CHANGE_FIELDS {
            match o.get(name) {
                None => problems.push(format!("refrozen.changes[{i}] has no {name:?} field")),
                Some(Value::String(s)) => {
                    let legal: &[&str] = match name {
                        "kind" => &FREEZE_CHANGE_KINDS,
                        "change" => &FREEZE_CHANGE_CHANGES,
                        "by" => &FREEZE_CHANGE_BY,
                        _ => &[],
                    };
                    if !legal.is_empty() && !legal.contains(&s.as_str()) {
                        problems.push(format!(
                            "refrozen.changes[{i}].{name} {s:?} is not one of {}",
                            legal.join(", ")
                        ));
                    }
                }
                Some(other) => problems.push(format!(
                    "refrozen.changes[{i}].{name} must be a string, found {}",
                    json_kind(other)
                )),
            }
        }
    }
}

/// Value rules that concern one line only (fields already have their JSON types).
fn check_values(obj: &Map<String, Value>, type_name: &str, problems: &mut Vec<String>) {
    let s = |name: &str| obj.get(name).and_then(Value::as_str).unwrap_or("");
    let u = |name: &str| obj.get(name).and_then(Value::as_u64).unwrap_or(0);
    match type_name {
        // Contract: "done is the only guaranteed terminator"; stop_reason is either a named
        // reason or "provider finish_reason ... passed through verbatim": never empty.
        "done" if s("stop_reason").is_empty() => problems.push(
            "done.stop_reason is empty; it must name a reason or pass the provider's through"
                .to_string(),
        ),
        // call ids and approval ids link lines together; an empty one links nothing.
        "tool_start" | "tool_end" | "diff" if s("call_id").is_empty() => {
            problems.push(format!("{type_name}.call_id is empty"))
        }
        "approval_request" | "approval_settled" if s("approval_id").is_empty() => {
            problems.push(format!("{type_name}.approval_id is empty"))
        }
        "approval_request" => {
            // Contract: "Such a request carries source_path ... and source_sha (first 12 hex
            // chars of the file's sha256) ... Both fields are empty strings when reason is gate."
            if s("reason") == "unapproved_source" {
                if !is_short_sha(s("source_sha")) {
                    problems.push(format!(
                        "approval_request.source_sha {:?} must be 12 lowercase hex digits when reason is unapproved_source",
                        s("source_sha")
                    ));
                }
                if s("source_path").is_empty() {
                    problems.push(
                        "approval_request.source_path is empty but reason is unapproved_source"
                            .to_string(),
                    );
                }
            } else if !s("source_path").is_empty() || !s("source_sha").is_empty() {
                problems.push(
                    "approval_request with reason gate must have empty source_path and source_sha"
                        .to_string(),
                );
            }
            // Contract: env "is omitted from the wire when empty".
            if obj
                .get("env")
                .and_then(Value::as_array)
                .is_some_and(|a| a.is_empty())
            {
                problems.push(
                    "approval_request.env is present but empty; an empty env is omitted"
                        .to_string(),
                );
            }
        }
        // Contract: "attempt is the one that goes out of the max_attempts budget": the first
        // send is attempt 1, so a resend is attempt 2 or later, and never past the budget.
        "retry" => {
            let (attempt, max) = (u("attempt"), u("max_attempts"));
            if attempt > max {
                problems.push(format!(
                    "retry.attempt {attempt} exceeds max_attempts {max}"
                ));
            }
            if attempt < 2 {
                problems.push(format!(
                    "retry.attempt {attempt} < 2: the first send is attempt 1, so a resend is attempt 2 or later"
                ));
            }
        }
        _ => {}
    }
}

fn check_hello(obj: &Map<String, Value>) -> Result<Parsed, Vec<String>> {
    let mut problems = Vec::new();
    unknown_keys(obj, "hello", &HELLO_FIELDS, &mut problems);
    // Contract: {"type":"hello","proto":"openmax-stdio/6","protocol_version":6,...}
    match obj.get("proto") {
        Some(Value::String(p)) if p == PROTO => {}
        Some(other) => problems.push(format!("hello.proto must be {PROTO:?}, found {other}")),
        None => problems.push("hello line has no \"proto\" field".to_string()),
    }
    match obj.get("protocol_version") {
        Some(v) if v.as_u64() == Some(u64::from(PROTOCOL_VERSION)) => {}
        Some(other) => problems.push(format!(
            "hello.protocol_version must be the integer {PROTOCOL_VERSION}, found {other}"
        )),
        None => problems.push("hello line has no \"protocol_version\" field".to_string()),
    }
    let session_id = want_string(obj, "hello", "session_id", &mut problems);
    if session_id.as_deref() == Some("") {
        problems.push("hello.session_id is empty".to_string());
    }
    want_string(obj, "hello", "version", &mut problems);
    want_string(obj, "hello", "project", &mut problems);
    let continued = match obj.get("continued") {
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            problems.push(format!(
                "hello.continued must be true or false, found {}",
                json_kind(other)
            ));
            None
        }
        None => {
            problems.push("hello line has no \"continued\" field".to_string());
            None
        }
    };
    match (problems.is_empty(), session_id, continued) {
        (true, Some(session_id), Some(continued)) => Ok(Parsed::Hello {
            session_id,
            continued,
        }),
        _ => Err(problems),
    }
}

fn check_transcript(obj: &Map<String, Value>) -> Result<Parsed, Vec<String>> {
    let mut problems = Vec::new();
    unknown_keys(obj, "transcript", &TRANSCRIPT_FIELDS, &mut problems);
    let session_id = want_string(obj, "transcript", "session_id", &mut problems);
    match obj.get("truncated") {
        Some(Value::Bool(_)) => {}
        Some(other) => problems.push(format!(
            "transcript.truncated must be true or false, found {}",
            json_kind(other)
        )),
        None => problems.push("transcript line has no \"truncated\" field".to_string()),
    }
    match obj.get("messages") {
        Some(Value::Array(messages)) => {
            let mut total = 0usize;
            for (i, m) in messages.iter().enumerate() {
                let Some(m) = m.as_object() else {
                    problems.push(format!("transcript.messages[{i}] is not an object"));
                    continue;
                };
                for key in m.keys() {
                    if key != "role" && key != "content" {
                        problems.push(format!("unknown field {key:?} in transcript.messages[{i}]"));
                    }
                }
                // Contract: "messages carries user and assistant text only".
                match m.get("role").and_then(Value::as_str) {
                    Some(r) if TRANSCRIPT_ROLES.contains(&r) => {}
                    Some(r) => problems.push(format!(
                        "transcript.messages[{i}].role {r:?} is not one of user, assistant"
                    )),
                    None => problems.push(format!(
                        "transcript.messages[{i}].role is missing or not a string"
                    )),
                }
                match m.get("content").and_then(Value::as_str) {
                    // Contract: "each message capped at 4096 characters and the whole line at
                    // 256 KiB of content".
                    Some(c) => {
                        let chars = c.chars().count();
                        if chars > TRANSCRIPT_MESSAGE_CHARS {
                            problems.push(format!(
                                "transcript.messages[{i}].content has {chars} characters; the cap is {TRANSCRIPT_MESSAGE_CHARS}"
                            ));
                        }
                        total += c.len();
                    }
                    None => problems.push(format!(
                        "transcript.messages[{i}].content is missing or not a string"
                    )),
                }
            }
            if total > TRANSCRIPT_CONTENT_BYTES {
                problems.push(format!(
                    "transcript content totals {total} bytes; the cap is {TRANSCRIPT_CONTENT_BYTES} (256 KiB)"
                ));
            }
        }
        Some(other) => problems.push(format!(
            "transcript.messages must be an array, found {}",
            json_kind(other)
        )),
        None => problems.push("transcript line has no \"messages\" field".to_string()),
    }
    match (problems.is_empty(), session_id) {
        (true, Some(session_id)) => Ok(Parsed::Transcript { session_id }),
        _ => Err(problems),
    }
}

fn unknown_keys(
    obj: &Map<String, Value>,
    type_name: &str,
    known: &[&str],
    problems: &mut Vec<String>,
) {
    for key in obj.keys() {
        if !known.contains(&key.as_str()) {
            problems.push(format!("unknown field {key:?} on a {type_name} line"));
        }
    }
}

fn want_string(
    obj: &Map<String, Value>,
    type_name: &str,
    name: &str,
    problems: &mut Vec<String>,
) -> Option<String> {
    match obj.get(name) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            problems.push(format!(
                "{type_name}.{name} must be a string, found {}",
                json_kind(other)
            ));
            None
        }
        None => {
            problems.push(format!("{type_name} line has no {name:?} field"));
            None
        }
    }
}

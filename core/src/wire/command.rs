//! Client commands: one JSON object per stdin line, discriminated by `cmd`.
//!
//! Parsing rules from the contract: unknown `cmd` values are errors that name the legal ones;
//! extra fields on a known command are ignored; blank lines are skipped (the caller sees
//! `Ok(None)`). A missing or mistyped field is an error naming the field. A key that appears
//! twice in one object, at any depth, is an error naming the key: serde_json would keep the
//! last one, and a proxy that reads the first would see another command. Duplicates are found
//! during the one parse of the line (`StrictValue`), not by a second pass.

use serde::{Deserialize, Serialize};

use super::field::{FieldSpec, FieldType};
pub use super::mode::Mode;

/// One client command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Start a turn with the text.
    User {
        /// The prompt.
        text: String,
    },
    /// Answer a pending approval.
    Approve {
        /// The request answered.
        approval_id: String,
        /// Whether it is approved.
        approved: bool,
    },
    /// Save the execution mode for this trusted project. The mode stays a string here so that
    /// an illegal value reaches the core, which answers it with a `protocol_error` naming the
    /// legal values.
    ApprovalMode {
        /// The mode as sent (validated by the core).
        mode: String,
    },
    /// Re-freeze tools, skills and prompt.
    Reload,
    /// Cancel the running turn.
    Cancel,
    /// Drain the in-flight turn, then exit.
    Quit,
}

/// The legal `cmd` values, in the contract's order.
pub const COMMAND_NAMES: [&str; 6] = [
    "user",
    "approve",
    "approval_mode",
    "reload",
    "cancel",
    "quit",
];

/// Why a command line did not parse. `Display` is the `protocol_error` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// Not a JSON value at all.
    NotJson(String),
    /// JSON, but not an object.
    NotObject,
    /// No `cmd` field, or it is not a string.
    MissingCmd,
    /// A `cmd` the contract does not define.
    UnknownCmd(String),
    /// A known command with a missing or mistyped field.
    BadField {
        /// The command.
        cmd: String,
        /// What is wrong with which field.
        detail: String,
    },
    /// The same key twice in one object (anywhere in the line); the key as a JSON string.
    DuplicateKey(String),
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::NotJson(e) => write!(f, "command line is not valid JSON: {e}"),
            CommandError::NotObject => {
                write!(f, "command line must be a JSON object with a \"cmd\" field")
            }
            CommandError::MissingCmd => write!(
                f,
                "command object has no string \"cmd\" field; legal values: {}",
                COMMAND_NAMES.join(", ")
            ),
            CommandError::UnknownCmd(c) => write!(
                f,
                "unknown cmd {c:?}; legal values: {}",
                COMMAND_NAMES.join(", ")
            ),
            CommandError::BadField { cmd, detail } => write!(f, "bad {cmd:?} command: {detail}"),
            CommandError::DuplicateKey(k) => write!(
                f,
                "command line has the key {k} twice in one object; each key may appear once"
            ),
        }
    }
}

impl std::error::Error for CommandError {}

impl Command {
    /// Parse one stdin line. `Ok(None)` for a blank line (only ASCII whitespace).
    pub fn parse_line(line: &str) -> Result<Option<Command>, CommandError> {
        if line.trim_ascii().is_empty() {
            return Ok(None);
        }
        let value = match serde_json::from_str::<StrictValue>(line) {
            Ok(v) => v.0,
            Err(e) => {
                let msg = e.to_string();
                return Err(match msg.strip_prefix(DUPLICATE_PREFIX) {
                    Some(rest) => CommandError::DuplicateKey(
                        rest.rsplit_once(" at line ")
                            .map_or(rest, |(k, _)| k)
                            .to_string(),
                    ),
                    None => CommandError::NotJson(msg),
                });
            }
        };
        let obj = value.as_object().ok_or(CommandError::NotObject)?;
        let cmd = obj
            .get("cmd")
            .and_then(|c| c.as_str())
            .ok_or(CommandError::MissingCmd)?;
        if !COMMAND_NAMES.contains(&cmd) {
            return Err(CommandError::UnknownCmd(cmd.to_string()));
        }
        let cmd = cmd.to_string();
        serde_json::from_value::<Command>(value)
            .map(Some)
            .map_err(|e| CommandError::BadField {
                cmd,
                detail: e.to_string(),
            })
    }

    /// The command as one JSON line (no newline), as a client would write it.
    pub fn to_line(&self) -> String {
        // Serializing a plain enum of strings and bools cannot fail.
        serde_json::to_string(self).expect("command serializes")
    }
}

/// The start of the parse error a duplicate key raises (the key follows).
const DUPLICATE_PREFIX: &str = "duplicate key ";

/// A JSON value parsed in one pass that refuses an object holding the same key twice, at any
/// depth (serde_json's own `Value` keeps the last).
struct StrictValue(serde_json::Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(serde_json::Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "{DUPLICATE_PREFIX}{key:?}"
                )));
            }
            let StrictValue(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(serde_json::Value::Object(out))
    }
}

/// One command's shape: its `cmd` value and its fields in wire order.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// The `cmd` value.
    pub cmd: &'static str,
    /// Its fields in wire order.
    pub fields: &'static [FieldSpec],
}

const fn field(name: &'static str, ty: FieldType, values: &'static [&'static str]) -> FieldSpec {
    FieldSpec {
        name,
        ty,
        required: true,
        values,
    }
}

/// The field table of every command, in [`COMMAND_NAMES`] order. The JSON Schema of
/// `--spec stdio --json` is generated from it (extra fields are allowed: they are ignored).
pub const COMMAND_FIELDS: &[CommandSpec] = &[
    CommandSpec {
        cmd: "user",
        fields: &[field("text", FieldType::String, &[])],
    },
    CommandSpec {
        cmd: "approve",
        fields: &[
            field("approval_id", FieldType::String, &[]),
            field("approved", FieldType::Bool, &[]),
        ],
    },
    CommandSpec {
        cmd: "approval_mode",
        fields: &[field("mode", FieldType::String, &Mode::ALL)],
    },
    CommandSpec {
        cmd: "reload",
        fields: &[],
    },
    CommandSpec {
        cmd: "cancel",
        fields: &[],
    },
    CommandSpec {
        cmd: "quit",
        fields: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_key_at_any_depth_is_refused_naming_it() {
        for (line, key) in [
            (r#"{"cmd":"user","text":"a","cmd":"quit"}"#, "\"cmd\""),
            (r#"{"cmd":"user","text":"a","text":"b"}"#, "\"text\""),
            (r#"{"cmd":"quit","x":{"k":1,"k":2}}"#, "\"k\""),
            (r#"{"cmd":"quit","x":[{"a\"b":1,"a\"b":2}]}"#, "\"a\\\"b\""),
        ] {
            let err = Command::parse_line(line).unwrap_err();
            assert_eq!(err, CommandError::DuplicateKey(key.to_string()), "{line}");
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn strict_parsing_keeps_every_other_answer() {
        let ok = r#"{"cmd":"approve","approval_id":"a1","approved":true,"extra":{"n":[1,-2,3.5,null,"s"]}}"#;
        assert_eq!(
            Command::parse_line(ok).unwrap(),
            Some(Command::Approve {
                approval_id: "a1".into(),
                approved: true
            })
        );
        assert!(matches!(
            Command::parse_line("{\"cmd\":"),
            Err(CommandError::NotJson(_))
        ));
        assert_eq!(Command::parse_line("[1]"), Err(CommandError::NotObject));
        assert_eq!(Command::parse_line("  "), Ok(None));
        // The same key in sibling objects is not a duplicate.
        assert!(Command::parse_line(r#"{"cmd":"quit","a":{"k":1},"b":{"k":2}}"#).is_ok());
    }
}

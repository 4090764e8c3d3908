//! `-p --output-schema FILE`: the final answer must be JSON valid against a JSON Schema.
//!
//! - [`OutputSchema::load`] reads FILE, parses it and compiles it with the `jsonschema` crate
//!   (draft detected from `$schema`, 2020-12 when none; the schema itself is checked against
//!   its meta-schema; `format` is asserted; no remote or file `$ref` is fetched, so the schema
//!   must be self-contained). Any failure there is a usage error, before a session starts.
//! - [`OutputSchema::instruct`] is the prompt the model gets: the person's prompt, then the
//!   schema and the instruction to answer with one JSON value only.
//! - [`OutputSchema::check`] reads a reply as JSON (the whole reply, or the inside of one
//!   fenced code block around it) and validates it, giving the validator's messages.
//! - [`OutputSchema::retry_prompt`] is the one follow-up turn when the answer is not valid: the
//!   messages, and the instruction again.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// At most this many validator messages are reported (and sent back to the model).
pub const MAX_ERRORS: usize = 20;

/// A compiled output schema.
pub struct OutputSchema {
    path: PathBuf,
    schema: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl OutputSchema {
    /// Read and compile the schema in `path`.
    pub fn load(path: &Path) -> Result<OutputSchema, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--output-schema {}: {e}", path.display()))?;
        let schema: Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "--output-schema {}: not JSON ({e}); the file must hold a JSON Schema",
                path.display()
            )
        })?;
        OutputSchema::new(path, schema)
    }

    /// Compile `schema` (read from `path`, named in messages).
    pub fn new(path: &Path, schema: Value) -> Result<OutputSchema, String> {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| {
                format!(
                    "--output-schema {}: not a valid JSON Schema: {e}",
                    path.display()
                )
            })?;
        Ok(OutputSchema {
            path: path.to_path_buf(),
            schema,
            validator,
        })
    }

    /// The file the schema came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The prompt with the schema and the instruction.
    pub fn instruct(&self, prompt: &str) -> String {
        format!(
            "{prompt}\n\nAnswer with one JSON value and nothing else (no prose before or after \
             it, no code fence), valid against this JSON Schema:\n{}",
            self.pretty()
        )
    }

    /// The follow-up turn after an answer that is not valid.
    pub fn retry_prompt(&self, errors: &[String]) -> String {
        let list: String = errors.iter().map(|e| format!("- {e}\n")).collect();
        format!(
            "Your answer is not valid against the JSON Schema:\n{list}Answer again with only \
             the corrected JSON value, valid against the schema."
        )
    }

    /// The JSON value of `reply` when it is valid, else the validator's messages (at most
    /// [`MAX_ERRORS`]; the first says when the reply is not JSON at all).
    pub fn check(&self, reply: &str) -> Result<Value, Vec<String>> {
        let json = unfenced(reply);
        let value: Value =
            serde_json::from_str(json).map_err(|e| vec![format!("the answer is not JSON: {e}")])?;
        let errors: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(MAX_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    format!("at the top level: {e}")
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(errors)
        }
    }

    fn pretty(&self) -> String {
        serde_json::to_string_pretty(&self.schema).unwrap_or_else(|_| self.schema.to_string())
    }
}

/// `reply` without surrounding whitespace and, when it is one fenced code block (```` ``` ````
/// or ```` ```json ````), without the fence.
fn unfenced(reply: &str) -> &str {
    let t = reply.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // The info string (`json`) runs to the first newline.
    match body.split_once('\n') {
        Some((info, inner)) if !info.contains('`') => inner.trim(),
        _ => t,
    }
}

/// Where an `--output-schema` run is.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// No turn ended normally yet (or the last one did not): nothing checked.
    Unchecked,
    /// The answer is valid: this value.
    Valid(Value),
    /// The answer is not valid: the validator's messages.
    Invalid(Vec<String>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> OutputSchema {
        OutputSchema::new(
            Path::new("s.json"),
            json!({
                "type": "object",
                "properties": {"name": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
                "required": ["name", "n"],
                "additionalProperties": false
            }),
        )
        .unwrap()
    }

    #[test]
    fn valid_answers_pass_plain_or_fenced() {
        let s = schema();
        assert_eq!(
            s.check(r#" {"name":"a","n":2} "#),
            Ok(json!({"name":"a","n":2}))
        );
        assert_eq!(
            s.check("```json\n{\"name\":\"a\",\"n\":2}\n```"),
            Ok(json!({"name":"a","n":2}))
        );
        assert!(s.instruct("list it").starts_with("list it\n\n"));
        assert!(s.instruct("x").contains("\"required\""));
    }

    #[test]
    fn invalid_answers_give_the_validators_messages() {
        let s = schema();
        let e = s.check(r#"{"name":5,"n":0}"#).unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e
            .iter()
            .any(|m| m.starts_with("at /name:") && m.contains("string")));
        assert!(e.iter().any(|m| m.starts_with("at /n:")));
        let e = s.check(r#"{"name":"a"}"#).unwrap_err();
        assert!(
            e[0].starts_with("at the top level:") && e[0].contains("\"n\""),
            "{e:?}"
        );
        let e = s.check("Sure! Here it is: {}").unwrap_err();
        assert!(e[0].starts_with("the answer is not JSON"), "{e:?}");
        let r = s.retry_prompt(&e);
        assert!(r.contains("the answer is not JSON"), "{r}");
    }

    #[test]
    fn a_broken_schema_is_refused() {
        let e = OutputSchema::new(Path::new("s.json"), json!({"type": 5})).unwrap_err();
        assert!(e.contains("not a valid JSON Schema"), "{e}");
        let e = OutputSchema::new(
            Path::new("s.json"),
            json!({"$ref": "https://example.com/remote.json"}),
        )
        .unwrap_err();
        assert!(e.contains("s.json"), "{e}");
    }

    #[test]
    fn formats_are_asserted() {
        let s = OutputSchema::new(
            Path::new("s.json"),
            json!({"type": "string", "format": "date"}),
        )
        .unwrap();
        assert!(s.check("\"2025-01-31\"").is_ok());
        assert!(s.check("\"yesterday\"").is_err());
    }
}

//! Typed access to a tool call's JSON arguments, with the error messages the model sees.
//!
//! Invariants: the arguments must be a JSON object; a `null` value counts as absent (some
//! providers send `null` for optional parameters); an argument the tool does not declare is an
//! error naming the ones it accepts.

use serde_json::{Map, Value};

/// A validated arguments object of one call.
pub struct Args<'a> {
    tool: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Check that `args` is an object holding only the `allowed` keys.
    pub fn new(tool: &'a str, args: &'a Value, allowed: &[&str]) -> Result<Self, String> {
        let map = match args {
            Value::Object(map) => map,
            other => {
                return Err(format!(
                    "{tool}: arguments must be a JSON object, got {}",
                    kind(other)
                ))
            }
        };
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                return Err(format!(
                    "{tool}: unknown argument `{key}` (accepted: {})",
                    allowed.join(", ")
                ));
            }
        }
        Ok(Args { tool, map })
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        match self.map.get(name) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    /// A required string.
    pub fn string(&self, name: &str) -> Result<&'a str, String> {
        match self.get(name) {
            None => Err(format!(
                "{}: missing required argument `{name}` (string)",
                self.tool
            )),
            Some(v) => v.as_str().ok_or_else(|| self.wrong(name, "a string", v)),
        }
    }

    /// An optional string.
    pub fn opt_string(&self, name: &str) -> Result<Option<&'a str>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.wrong(name, "a string", v)),
        }
    }

    /// An optional integer ≥ 1.
    pub fn opt_positive(&self, name: &str) -> Result<Option<u64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Ok(Some(n)),
                _ => match v.as_f64() {
                    // Accept 3.0 from models that emit floats for integers.
                    Some(f) if f >= 1.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => {
                        Ok(Some(f as u64))
                    }
                    _ => Err(self.wrong(name, "an integer ≥ 1", v)),
                },
            },
        }
    }

    /// An optional number > 0.
    pub fn opt_seconds(&self, name: &str) -> Result<Option<f64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(f) if f > 0.0 && f.is_finite() => Ok(Some(f)),
                _ => Err(self.wrong(name, "a number of seconds > 0", v)),
            },
        }
    }

    /// An optional boolean, `false` when absent.
    pub fn flag(&self, name: &str) -> Result<bool, String> {
        match self.get(name) {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| self.wrong(name, "a boolean", v)),
        }
    }

    fn wrong(&self, name: &str, want: &str, got: &Value) -> String {
        format!(
            "{}: argument `{name}` must be {want}, got {}",
            self.tool,
            short(got)
        )
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(60).collect();
        format!("{cut}…")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages() {
        let v = json!({"path": 3, "offset": 0, "x": null});
        let e = Args::new("read_file", &v, &["path", "offset"])
            .err()
            .unwrap();
        assert_eq!(
            e,
            "read_file: unknown argument `x` (accepted: path, offset)"
        );
        let v = json!({"path": 3, "offset": 0});
        let a = Args::new("read_file", &v, &["path", "offset", "limit"]).unwrap();
        assert_eq!(
            a.string("path").unwrap_err(),
            "read_file: argument `path` must be a string, got 3"
        );
        assert!(a
            .opt_positive("offset")
            .unwrap_err()
            .contains("an integer ≥ 1"));
        assert_eq!(a.opt_positive("limit").unwrap(), None);
        let v = json!({"offset": 2.0});
        let a = Args::new("read_file", &v, &["path", "offset"]).unwrap();
        assert_eq!(a.opt_positive("offset").unwrap(), Some(2));
        assert_eq!(
            a.string("path").unwrap_err(),
            "read_file: missing required argument `path` (string)"
        );
        let e = Args::new("x", &json!([1]), &[]).err().unwrap();
        assert_eq!(e, "x: arguments must be a JSON object, got an array");
    }
}

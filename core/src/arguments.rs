//! Checking a tool call's arguments against the tool's JSON Schema, for arguments the harness
//! did not get from the model (a blocking `tool_start` hook's rewrite).
//!
//! The check covers what tool schemas say about the shape of their arguments: `type`,
//! `enum`, `const`, `properties`, `required`, `additionalProperties` (`false` or a schema),
//! `items`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`,
//! `maxLength`, `minItems`, `maxItems`, `allOf`, `anyOf`, `oneOf`, `not` and local `$ref`s
//! (`#/…`). Other keywords (`pattern`, `format`, …) are left to the tool itself, which checks
//! its own arguments when it is inspected and run.
//!
//! Invariants: pure; never panics on any schema or value; a schema nested (or referring to
//! itself) deeper than [`MAX_DEPTH`] is not followed further, so the check always ends. The
//! error names the first failing location (`$.path`) and what is wrong there.

use serde_json::Value;

/// How deep the check follows nested schemas and `$ref`s.
pub const MAX_DEPTH: usize = 32;

/// Check `args` (a call's whole arguments) against `schema` (the tool's parameters schema).
pub fn check(schema: &Value, args: &Value) -> Result<(), String> {
    if !args.is_object() {
        return Err(format!(
            "$: the arguments must be a JSON object, not {}",
            kind(args)
        ));
    }
    at(schema, schema, args, "$", 0)
}

fn at(root: &Value, schema: &Value, v: &Value, path: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let s = match schema {
        Value::Object(s) => s,
        Value::Bool(false) => return Err(format!("{path}: no value is allowed here")),
        _ => return Ok(()),
    };
    let sub = |schema: &Value, v: &Value, path: &str| at(root, schema, v, path, depth + 1);
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        if let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p)) {
            sub(target, v, path)?;
        }
    }
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => is_type(v, t),
            Value::Array(ts) => ts.iter().any(|t| t.as_str().is_some_and(|t| is_type(v, t))),
            _ => true,
        };
        if !ok {
            return Err(format!("{path}: must be of type {t}, not {}", kind(v)));
        }
    }
    if let Some(Value::Array(options)) = s.get("enum") {
        if !options.contains(v) {
            return Err(format!(
                "{path}: must be one of {}",
                Value::Array(options.clone())
            ));
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            return Err(format!("{path}: must be {c}"));
        }
    }
    if let Value::Object(obj) = v {
        let props = s.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(req)) = s.get("required") {
            for name in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(name) {
                    return Err(format!("{path}: the required property {name:?} is missing"));
                }
            }
        }
        for (name, value) in obj {
            let inner = format!("{path}.{name}");
            match props.and_then(|p| p.get(name)) {
                Some(p) => sub(p, value, &inner)?,
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!("{path}: the property {name:?} is not allowed"))
                    }
                    Some(extra @ Value::Object(_)) => sub(extra, value, &inner)?,
                    Some(_) | None => {}
                },
            }
        }
    }
    if let Value::Array(items) = v {
        if let Some(item) = s.get("items") {
            for (i, value) in items.iter().enumerate() {
                sub(item, value, &format!("{path}[{i}]"))?;
            }
        }
        let n = items.len() as u64;
        if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
            if n < min {
                return Err(format!("{path}: must have at least {min} items, not {n}"));
            }
        }
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64) {
            if n > max {
                return Err(format!("{path}: must have at most {max} items, not {n}"));
            }
        }
    }
    if let Value::String(text) = v {
        let n = text.chars().count() as u64;
        if let Some(min) = s.get("minLength").and_then(Value::as_u64) {
            if n < min {
                return Err(format!("{path}: must be at least {min} characters long"));
            }
        }
        if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
            if n > max {
                return Err(format!("{path}: must be at most {max} characters long"));
            }
        }
    }
    if let Some(n) = v.as_f64() {
        let bound = |key: &str| s.get(key).and_then(Value::as_f64);
        let broken = [
            ("minimum", bound("minimum").filter(|b| n < *b)),
            ("maximum", bound("maximum").filter(|b| n > *b)),
            (
                "exclusiveMinimum",
                bound("exclusiveMinimum").filter(|b| n <= *b),
            ),
            (
                "exclusiveMaximum",
                bound("exclusiveMaximum").filter(|b| n >= *b),
            ),
        ];
        if let Some((key, Some(b))) = broken.into_iter().find(|(_, b)| b.is_some()) {
            return Err(format!("{path}: {n} breaks {key} {b}"));
        }
    }
    if let Some(Value::Array(all)) = s.get("allOf") {
        for option in all {
            sub(option, v, path)?;
        }
    }
    if let Some(Value::Array(any)) = s.get("anyOf") {
        if !any.is_empty() && !any.iter().any(|o| sub(o, v, path).is_ok()) {
            return Err(format!("{path}: matches none of the anyOf options"));
        }
    }
    if let Some(Value::Array(one)) = s.get("oneOf") {
        let passing = one.iter().filter(|o| sub(o, v, path).is_ok()).count();
        if !one.is_empty() && passing != 1 {
            return Err(format!(
                "{path}: matches {passing} of the oneOf options, not exactly one"
            ));
        }
    }
    if let Some(not) = s.get("not") {
        if sub(not, v, path).is_ok() {
            return Err(format!("{path}: matches a schema it must not match"));
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
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        _ => true,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "content": {"type": "string"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "n": {"type": "integer", "minimum": 1, "maximum": 9},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    #[test]
    fn good_arguments_pass() {
        let s = write_schema();
        check(&s, &json!({"path": "b.rs", "content": ""})).unwrap();
        check(
            &s,
            &json!({"path": "b.rs", "content": "", "n": 3, "tags": ["x"]}),
        )
        .unwrap();
        check(
            &json!({"type": "object"}),
            &json!({"anything": [1, {"x": null}]}),
        )
        .unwrap();
        check(&json!(true), &json!({})).unwrap();
    }

    #[test]
    fn each_broken_rule_is_named_with_its_place() {
        let s = write_schema();
        let err = |v: Value| check(&s, &v).unwrap_err();
        assert!(err(json!([1])).contains("must be a JSON object"));
        assert!(err(json!({"path": "a"})).contains("\"content\" is missing"));
        assert!(err(json!({"path": 5, "content": ""})).starts_with("$.path: must be of type"));
        assert!(err(json!({"path": "", "content": ""})).contains("at least 1 characters"));
        assert!(err(json!({"path": "a", "content": "", "x": 1})).contains("\"x\" is not allowed"));
        assert!(err(json!({"path": "a", "content": "", "mode": "c"})).contains("one of"));
        assert!(err(json!({"path": "a", "content": "", "n": 10})).contains("maximum 9"));
        assert!(err(json!({"path": "a", "content": "", "n": 1.5})).contains("type"));
        assert!(err(json!({"path": "a", "content": "", "tags": [1]})).starts_with("$.tags[0]"));
        assert!(
            err(json!({"path": "a", "content": "", "tags": ["a", "b", "c"]})).contains("at most 2")
        );
    }

    #[test]
    fn combinators_and_refs() {
        let s = json!({
            "type": "object",
            "$defs": {"uri": {"type": "string", "minLength": 3}},
            "properties": {
                "uri": {"$ref": "#/$defs/uri"},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "one": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
                "no": {"not": {"type": "null"}}
            }
        });
        check(&s, &json!({"uri": "abc", "either": 3, "one": 1.5, "no": 1})).unwrap();
        assert!(check(&s, &json!({"uri": "a"})).is_err());
        assert!(check(&s, &json!({"either": true})).is_err());
        assert!(check(&s, &json!({"one": 2}))
            .unwrap_err()
            .contains("2 of the oneOf"));
        assert!(check(&s, &json!({"no": null})).is_err());
    }

    #[test]
    fn a_schema_that_refers_to_itself_still_ends() {
        let s = json!({"type": "object", "properties": {"x": {"$ref": "#"}}});
        let mut v = json!({});
        for _ in 0..100 {
            v = json!({ "x": v });
        }
        check(&s, &v).unwrap();
        let weird = json!({"type": 7, "enum": "x", "properties": [], "required": {}});
        check(&weird, &json!({"a": 1})).unwrap();
    }
}

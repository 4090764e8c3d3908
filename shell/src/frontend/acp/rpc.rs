//! JSON-RPC 2.0 envelopes for ACP, one message per line: [`parse`] sorts an input line into a
//! request, a notification or a response to one of openmax's own requests, and the writers
//! ([`result_line`], [`error_line`], [`notification_line`], [`request_line`]) produce the lines
//! openmax sends.
//!
//! Invariants (the protocol hygiene the adapter promises):
//! - Every line that is not JSON is answered with -32700 and `id: null`; a JSON value that is
//!   not a single JSON-RPC 2.0 object (a batch, a scalar, a wrong or missing `jsonrpc`, a
//!   method that is not a string, an id that is neither a string nor a number, params that
//!   are neither an object nor an array) is answered with -32600, with the request's id when it
//!   had a usable one. Nothing here ever ends the connection.
//! - Params stay raw JSON here; the dispatcher decodes them with the ACP schema types and
//!   answers a mismatch with -32602 ([`INVALID_PARAMS`]).

use serde_json::{json, Map, Value};

/// Malformed JSON.
pub const PARSE_ERROR: i32 = -32700;
/// Not a valid JSON-RPC request object.
pub const INVALID_REQUEST: i32 = -32600;
/// The method is not one openmax serves.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// The params do not match the method's schema.
pub const INVALID_PARAMS: i32 = -32602;
/// openmax failed to carry out a valid request (the message says what failed).
pub const INTERNAL_ERROR: i32 = -32603;
/// ACP's "authentication required"; openmax uses it for a project that is not trusted.
pub const AUTH_REQUIRED: i32 = -32000;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    fn to_value(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// One well-formed input message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call that wants an answer; `id` is a JSON string or number.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A call that wants no answer.
    Notification { method: String, params: Value },
    /// The client's answer to a request openmax sent.
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
}

/// A line that is not a usable message: answer `error` to `id` (`null` when unknown).
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub id: Value,
    pub error: RpcError,
}

fn reject(id: Value, code: i32, message: impl Into<String>) -> Rejected {
    Rejected {
        id,
        error: RpcError::new(code, message),
    }
}

fn usable_id(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_))
}

/// Sort one input line.
pub fn parse(line: &str) -> Result<Incoming, Rejected> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| reject(Value::Null, PARSE_ERROR, format!("parse error: {e}")))?;
    let obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(reject(
                Value::Null,
                INVALID_REQUEST,
                "batch requests are not supported: send one JSON-RPC object per line",
            ))
        }
        _ => {
            return Err(reject(
                Value::Null,
                INVALID_REQUEST,
                "invalid request: a JSON-RPC message is a JSON object",
            ))
        }
    };
    let id = obj.get("id").cloned();
    let answer_id = id.clone().filter(usable_id).unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(reject(
            answer_id,
            INVALID_REQUEST,
            "invalid request: \"jsonrpc\" must be \"2.0\"",
        ));
    }
    if let Some(method) = obj.get("method") {
        let Some(method) = method.as_str() else {
            return Err(reject(
                answer_id,
                INVALID_REQUEST,
                "invalid request: \"method\" must be a string",
            ));
        };
        let params = match obj.get("params") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(p @ (Value::Object(_) | Value::Array(_))) => p.clone(),
            Some(_) => {
                return Err(reject(
                    answer_id,
                    INVALID_REQUEST,
                    "invalid request: \"params\" must be an object or an array",
                ))
            }
        };
        return match id {
            None => Ok(Incoming::Notification {
                method: method.to_string(),
                params,
            }),
            Some(id) if usable_id(&id) => Ok(Incoming::Request {
                id,
                method: method.to_string(),
                params,
            }),
            Some(_) => Err(reject(
                Value::Null,
                INVALID_REQUEST,
                "invalid request: \"id\" must be a string or a number",
            )),
        };
    }
    let Some(id) = id.filter(usable_id) else {
        return Err(reject(
            Value::Null,
            INVALID_REQUEST,
            "invalid request: a message needs a \"method\", or an \"id\" with a \"result\" or \
             \"error\"",
        ));
    };
    if let Some(err) = obj.get("error") {
        let code = err
            .get("code")
            .and_then(Value::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(INTERNAL_ERROR);
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        return Ok(Incoming::Response {
            id,
            result: Err(RpcError { code, message }),
        });
    }
    match obj.get("result") {
        Some(r) => Ok(Incoming::Response {
            id,
            result: Ok(r.clone()),
        }),
        None => Err(reject(
            id,
            INVALID_REQUEST,
            "invalid request: a response needs a \"result\" or an \"error\"",
        )),
    }
}

/// A success response line.
pub fn result_line(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error response line.
pub fn error_line(id: &Value, error: &RpcError) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()}).to_string()
}

/// A notification line.
pub fn notification_line(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// A request line (openmax asking the client).
pub fn request_line(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> (Value, i32) {
        let r = parse(line).unwrap_err();
        (r.id, r.error.code)
    }

    #[test]
    fn requests_notifications_and_responses() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#),
            Ok(Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({"a":1})
            })
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel"}"#),
            Ok(Incoming::Notification {
                method: "session/cancel".into(),
                params: json!({})
            })
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":"x","result":{"ok":true}}"#),
            Ok(Incoming::Response {
                id: json!("x"),
                result: Ok(json!({"ok":true}))
            })
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"m"}}"#),
            Ok(Incoming::Response {
                id: json!(3),
                result: Err(RpcError::new(-32603, "m"))
            })
        );
    }

    #[test]
    fn malformed_lines_get_the_standard_codes() {
        assert_eq!(code("{not json"), (Value::Null, PARSE_ERROR));
        assert_eq!(code("[1,2]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(code("7"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(r#"{"id":4,"method":"initialize"}"#),
            (json!(4), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":4,"method":"x"}"#),
            (json!(4), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":5,"method":7}"#),
            (json!(5), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":6,"method":"x","params":3}"#),
            (json!(6), INVALID_REQUEST)
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0"}"#), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":8}"#),
            (json!(8), INVALID_REQUEST)
        );
    }

    #[test]
    fn writers_produce_json_rpc_lines() {
        let e = error_line(&Value::Null, &RpcError::new(PARSE_ERROR, "bad"));
        assert_eq!(
            serde_json::from_str::<Value>(&e).unwrap(),
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}})
        );
        let r = request_line(2, "session/request_permission", json!({}));
        assert!(parse(&r).is_ok());
        let n = notification_line("session/update", json!({"x":1}));
        assert!(matches!(parse(&n), Ok(Incoming::Notification { .. })));
        let ok = result_line(&json!("a"), json!(null));
        assert!(matches!(parse(&ok), Ok(Incoming::Response { .. })));
    }
}

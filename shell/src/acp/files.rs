//! The client's `fs` capability as the file tools' [`ClientFiles`]: `fs/read_text_file` and
//! `fs/write_text_file` requests sent through the connection, answered on a tool's blocking
//! thread.
//!
//! Invariants:
//! - Only the methods the client offered in `initialize` are used; the other falls back to the
//!   disk.
//! - Every request is answered or fails: an error answer, the end of the connection (its
//!   pending file requests are dropped) or no answer within [`ANSWER_TIMEOUT`] is the tool's
//!   clear error, never a hang.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use agent_client_protocol_schema::v1::{
    ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest,
};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::session::Msg;
use crate::tools::client_files::ClientFiles;

/// How long a file tool waits for the client's answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A file request for the connection to send: the method, its params, where the answer goes.
#[derive(Debug)]
pub struct FsCall {
    pub method: &'static str,
    pub params: Value,
    pub reply: mpsc::Sender<Result<Value, String>>,
}

/// One session's view of the client's files.
pub struct AcpFiles {
    pub session_id: String,
    pub tx: UnboundedSender<Msg>,
    pub read: bool,
    pub write: bool,
}

impl AcpFiles {
    fn call(&self, method: &'static str, params: Value) -> Result<Value, String> {
        let (reply, answer) = mpsc::channel();
        self.tx
            .send(Msg::Fs(FsCall {
                method,
                params,
                reply,
            }))
            .map_err(|_| "the connection to the client has ended".to_string())?;
        match answer.recv_timeout(ANSWER_TIMEOUT) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "no answer to {method} within {} s",
                ANSWER_TIMEOUT.as_secs()
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err("the connection to the client ended before it answered".into())
            }
        }
    }
}

impl ClientFiles for AcpFiles {
    fn read(&self, abs: &Path) -> Option<Result<String, String>> {
        if !self.read {
            return None;
        }
        let req = ReadTextFileRequest::new(self.session_id.clone(), abs.to_path_buf());
        let params = serde_json::to_value(req).unwrap_or(Value::Null);
        Some(self.call("fs/read_text_file", params).and_then(|v| {
            serde_json::from_value::<ReadTextFileResponse>(v)
                .map(|r| r.content)
                .map_err(|e| format!("a malformed fs/read_text_file answer: {e}"))
        }))
    }

    fn write(&self, abs: &Path, text: &str) -> Option<Result<(), String>> {
        if !self.write {
            return None;
        }
        let req = WriteTextFileRequest::new(self.session_id.clone(), abs.to_path_buf(), text);
        let params = serde_json::to_value(req).unwrap_or(Value::Null);
        Some(self.call("fs/write_text_file", params).map(|_| ()))
    }
}

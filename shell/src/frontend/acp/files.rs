//! The client's `fs` capability as the file tools' [`ClientFiles`]: `fs/read_text_file` and
//! `fs/write_text_file` requests sent through the connection, answered on a tool's blocking
//! thread.
//!
//! Invariants:
//! - Only the methods the client offered in `initialize` are used; the other falls back to the
//!   disk.
//! - Every request is answered or fails: an error answer or the end of the connection (its
//!   pending file requests are dropped) is the tool's clear error; the wait is the call's, so
//!   its cancel and its time limit (`[limits] tool_timeout_s`) end it (checked every [`POLL`]),
//!   never a hang and never a second, shorter limit of our own.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use agent_client_protocol_schema::v1::{
    ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest,
};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::msg::{FsCall, Msg};
use crate::tools::client_files::{ClientError, ClientFiles};
use crate::tools::stop::Stop;

/// How often a file tool waiting for the client's answer looks at its call's stop flag.
pub const POLL: Duration = Duration::from_millis(20);

/// One session's view of the client's files.
pub struct AcpFiles {
    pub session_id: String,
    pub tx: UnboundedSender<Msg>,
    pub read: bool,
    pub write: bool,
}

impl AcpFiles {
    fn call(&self, method: &'static str, params: Value, stop: &Stop) -> Result<Value, ClientError> {
        let (reply, answer) = mpsc::channel();
        self.tx
            .send(Msg::Fs(FsCall {
                method,
                params,
                reply,
            }))
            .map_err(|_| ClientError::Failed("the connection to the client has ended".into()))?;
        loop {
            match answer.recv_timeout(POLL) {
                Ok(r) => return r.map_err(ClientError::Failed),
                Err(mpsc::RecvTimeoutError::Timeout) if stop.interrupted() => {
                    return Err(ClientError::Unanswered)
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ClientError::Failed(
                        "the connection to the client ended before it answered".into(),
                    ))
                }
            }
        }
    }
}

impl ClientFiles for AcpFiles {
    fn reads(&self) -> bool {
        self.read
    }

    fn writes(&self) -> bool {
        self.write
    }

    fn read(&self, abs: &Path, stop: &Stop) -> Result<String, ClientError> {
        let req = ReadTextFileRequest::new(self.session_id.clone(), abs.to_path_buf());
        let params = serde_json::to_value(req).unwrap_or(Value::Null);
        self.call("fs/read_text_file", params, stop).and_then(|v| {
            serde_json::from_value::<ReadTextFileResponse>(v)
                .map(|r| r.content)
                .map_err(|e| {
                    ClientError::Failed(format!("a malformed fs/read_text_file answer: {e}"))
                })
        })
    }

    fn write(&self, abs: &Path, text: &str, stop: &Stop) -> Result<(), ClientError> {
        let req = WriteTextFileRequest::new(self.session_id.clone(), abs.to_path_buf(), text);
        let params = serde_json::to_value(req).unwrap_or(Value::Null);
        self.call("fs/write_text_file", params, stop).map(|_| ())
    }
}

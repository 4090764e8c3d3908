//! What reaches the ACP connection's loop from stdin, the sessions' runtimes, their file tools
//! and the signal handler: one message type, apart from the modules that send it.

use openmax_core::machine::Input;
use openmax_core::wire::Event;
use serde_json::Value;

/// What reaches the connection loop.
#[derive(Debug)]
pub enum Msg {
    /// A framed stdin input (a line, a framing fault, or end of input).
    Stdin(Input),
    /// An event of session `0`.
    Event(String, Event),
    /// Session `0`'s core went quiet.
    Quiet(String),
    /// Session `0`'s runtime ended.
    Exited(String),
    /// A file tool's request for the client (`fs/read_text_file`, `fs/write_text_file`).
    Fs(FsCall),
    /// SIGINT or SIGTERM reached the process.
    Signal,
}

/// A file request for the connection to send: the method, its params, where the answer goes.
#[derive(Debug)]
pub struct FsCall {
    pub method: &'static str,
    pub params: Value,
    pub reply: std::sync::mpsc::Sender<Result<Value, String>>,
}

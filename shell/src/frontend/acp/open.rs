//! Opening an ACP session off the connection loop: `session/new` and `session/load` start the
//! session (settings, MCP servers, freeze, session file) in a task of their own and report the
//! outcome as an [`Opening`], so the loop keeps answering the other sessions meanwhile (a
//! `session/cancel`, a permission answer, a signal).
//!
//! Invariants: every spawned open reports exactly one [`Opening`]; a project that is not
//! trusted is refused (-32000 naming `openmax --trust`) before anything is started or written
//! (no session file, no MCP server); the client's file capability is wired
//! into the session's file tools before it runs.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::files::AcpFiles;
use super::msg::Msg;
use super::rpc::{self, RpcError};
use crate::mcp::ServerDef;
use crate::start::Flags;
use crate::start::{Opened, Resume};
use crate::tools::client_files::ClientFilesRef;

/// The outcome of one open, for the request `id`.
pub(crate) struct Opening {
    pub id: Value,
    /// The session id of a `session/load`.
    pub load: Option<String>,
    pub result: Result<Opened, RpcError>,
}

/// What an open needs, taken from the connection.
pub(crate) struct OpenArgs {
    pub flags: Flags,
    pub cwd: PathBuf,
    pub resume: Resume,
    pub client_mcp: Vec<ServerDef>,
    /// The client's `fs` capability: `readTextFile`, `writeTextFile`.
    pub client_fs: (bool, bool),
    pub tx: UnboundedSender<Msg>,
}

/// Open the session and make it ready to run.
pub(crate) async fn open(a: OpenArgs) -> Result<Opened, RpcError> {
    let opener = crate::start::Opener::Acp;
    let mut opened = crate::start::open(&a.flags, Some(&a.cwd), a.resume, opener, a.client_mcp)
        .await
        .map_err(|e| {
            let code = if e.untrusted {
                rpc::AUTH_REQUIRED
            } else {
                rpc::INTERNAL_ERROR
            };
            RpcError::new(code, e.message)
        })?;
    let (read, write) = a.client_fs;
    if read || write {
        let files = AcpFiles {
            session_id: opened.session_id.clone(),
            tx: a.tx,
            read,
            write,
        };
        opened
            .backend
            .set_client_files(ClientFilesRef(Some(Arc::new(files))));
    }
    opened.backend.settle_session().map_err(|e| {
        RpcError::new(
            rpc::INTERNAL_ERROR,
            format!("could not start a session: {e}"),
        )
    })?;
    Ok(opened)
}

//! One ACP session: an openmax session (core, backend, runtime) running on the connection's
//! thread, whose events come back to the connection as [`Msg`]s through an [`AcpSink`].
//!
//! Invariants: every event of a session reaches the connection in emission order, each quiet
//! point is reported ([`Msg::Quiet`]) so a held `protocol_error` resolves, and the end of the
//! session's runtime is reported once ([`Msg::Exited`]) after its last event, so a prompt still
//! open then is answered instead of left hanging.

use std::cell::Cell;
use std::rc::Rc;

use agent_client_protocol_schema::v1::{SessionMode, SessionModeState};
use openmax_core::wire::{Event, Mode};
use tokio::sync::mpsc::UnboundedSender;

use super::msg::Msg;
use crate::run::Sink;
use crate::run::{InputTx, Runtime};

/// The sink of one session: forwards to the connection.
pub struct AcpSink {
    session_id: String,
    tx: UnboundedSender<Msg>,
    gone: Rc<Cell<bool>>,
}

impl Sink for AcpSink {
    fn event(&mut self, event: Event) {
        let _ = self.tx.send(Msg::Event(self.session_id.clone(), event));
    }

    fn flush(&mut self) {
        let _ = self.tx.send(Msg::Quiet(self.session_id.clone()));
    }

    fn client_gone(&self) -> bool {
        self.gone.get()
    }
}

/// Start the opened session's runtime on the current `LocalSet`; returns its input sender.
pub(crate) fn spawn(
    opened: crate::start::Opened,
    tx: UnboundedSender<Msg>,
    gone: Rc<Cell<bool>>,
) -> InputTx {
    let session_id = opened.session_id.clone();
    let sink = AcpSink {
        session_id: session_id.clone(),
        tx: tx.clone(),
        gone,
    };
    let mut runtime = Runtime::new(opened.core, opened.backend, sink);
    runtime.forward_notices(opened.notices);
    let input = runtime.sender();
    tokio::task::spawn_local(async move {
        let _ = runtime.run().await;
        let _ = tx.send(Msg::Exited(session_id));
    });
    input
}

/// The ACP modes: the execution modes, current first in nothing but the id.
pub fn modes(current: Mode) -> SessionModeState {
    let all = [
        (Mode::Auto, "Auto", "Run every tool call without asking"),
        (
            Mode::Ask,
            "Ask",
            "Ask before every mutating call and every ask rule match",
        ),
        (
            Mode::Readonly,
            "Read-only",
            "Refuse mutating calls without asking",
        ),
    ];
    SessionModeState::new(
        current.as_str(),
        all.iter()
            .map(|(m, name, desc)| SessionMode::new(m.as_str(), *name).description(*desc))
            .collect(),
    )
}

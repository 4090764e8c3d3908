//! The channel every effect's answer, every frontend's command and every notice reaches the
//! runtime's core on.

use openmax_core::machine::Input;
use tokio::sync::mpsc;

/// The channel every effect answers on.
pub type InputTx = mpsc::UnboundedSender<Input>;

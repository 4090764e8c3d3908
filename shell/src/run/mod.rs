//! The run loop and the effects it carries out: [`runtime`] is the one loop that feeds the core
//! and drains it; [`backend`] performs each effect (provider requests, tools, hooks, the session
//! store, the freeze) and reports what happened; [`persist`] appends the session record on its
//! own thread; [`sink`] is where the events go (each frontend implements it).

pub mod backend;
pub mod input;
pub mod persist;
pub mod runtime;
pub mod sink;

pub use backend::Backend;
pub use input::InputTx;
pub use runtime::{Runtime, SignalPolicy};
pub use sink::Sink;

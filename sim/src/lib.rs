//! openmax-sim: a deterministic driver for the pure core (virtual clock, scripted faults), the
//! quickcheck generators of scenarios, and the loopback mock provider that serves the same
//! scripts over HTTP in each provider's wire format.
//!
//! It must never let wall-clock time or scheduling change what a scenario produces: the same
//! scenario run twice gives byte-identical output. The mock server binds loopback only.
//!
//! - [`scenario`]: the scenario file format.
//! - [`driver`]: runs a scenario through the core on a virtual clock.
//! - [`replies`]: how a scripted reply becomes the core's provider inputs.
//! - [`trace`]: what a run produced (inputs fed, outputs drained, requests sent) and its views.
//! - [`checks`]: the turn guarantees as named checks over a run.
//! - [`oracle`]: the core's stream validator and pairing checker applied to a run.
//! - [`gen`]: quickcheck generators of scenarios, with shrinking.
//! - [`coverage`]: which features, faults and endings generated runs reach.

pub mod checks;
pub mod coverage;
pub mod driver;
pub mod explore;
pub mod gen;
pub mod mock;
pub mod oracle;
pub mod replies;
pub mod scenario;
pub mod script;
pub mod trace;

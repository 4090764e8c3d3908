//! openmax-sim: a deterministic driver for the pure core (virtual clock, scripted faults), the
//! quickcheck generators of scenarios, and the loopback mock provider that serves the same
//! scripts over HTTP in each provider's wire format.
//!
//! It must never let wall-clock time or scheduling change what a scenario produces: the same
//! scenario run twice gives byte-identical output. The mock server binds loopback only.

pub mod mock;
pub mod script;

//! End-to-end test support: spawn the real `openmax` binary with a temporary `$OPENMAX_HOME`
//! and project against the loopback mock provider, and check every stream with the validator.
//!
//! Tests here must only ever reach 127.0.0.1.

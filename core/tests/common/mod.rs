//! Code shared by the permission rules' property tests.

pub mod shell_gen;

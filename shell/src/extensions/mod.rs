//! Project extensions and the freeze: external tools (`.openmax/tools/<name>.json`), skills
//! (`.openmax/skills/<name>/SKILL.md`), named agents (`.openmax/agents/<name>.md`), the prompt files (`AGENTS.md`, `CLAUDE.md`) and the
//! prompt's environment section, and the snapshot of their
//! exact bytes that a session is frozen on.
//!
//! Invariants: everything here reads the project, which is agent-writable, so nothing read here
//! is trusted: external code is identified by the sha256 of its exact bytes ([`source`]) and
//! only runs when a human approved those bytes (the core decides, from the plan's
//! [`openmax_core::tool::SourceGate`]). A broken manifest never stops the others from loading: it
//! becomes a note for the model and a line on stderr.

pub mod agents;
pub mod environment;
pub mod external;
pub mod freeze;
pub mod instructions;
pub mod manifest;
pub mod process;
pub mod prompt;
pub mod skills;
pub mod source;

#[cfg(test)]
pub(crate) mod approval_tests;

pub use manifest::ExternalTool;

/// Names an external tool may not take: the built-in tools and `skill`.
pub fn is_reserved(name: &str) -> bool {
    crate::tools::is_builtin(name) || name == skills::SKILL_TOOL
}

#[cfg(test)]
mod tests {
    /// Every built-in tool's name and `skill` are reserved; no other name is.
    #[test]
    fn the_builtin_tools_and_skill_are_reserved_and_nothing_else() {
        for name in crate::tools::BUILTIN_NAMES
            .iter()
            .chain(&[super::skills::SKILL_TOOL])
        {
            assert!(super::is_reserved(name), "{name}");
        }
        for name in ["deploy", "skills", "Skill", "shell2", ""] {
            assert!(!super::is_reserved(name), "{name}");
        }
    }
}

//! `/undo` over ACP: advertised to the client as an available command once a session opens; a
//! prompt whose text is `/undo …` runs no turn. `/undo` goes back before the session's last
//! change, `/undo N` before its turn N, `--force` also restores paths someone changed since,
//! and `/undo list` lists the session's checkpoints. The undo is done at once (the editor shows
//! the files change; `/undo` again undoes it), its report is the agent's message, and the
//! model is told at its next turn through a note, as after `openmax undo`.

use agent_client_protocol_schema::v1::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionNotification,
    SessionUpdate, UnstructuredCommandInput,
};

use crate::checkpoint::undo::{self as u, Pick};
use crate::checkpoint::Project;
use crate::frontend::tui::undo::{parse, UndoAsk};

/// The `available_commands_update` of a session.
pub fn commands(session_id: &str) -> SessionNotification {
    let undo = AvailableCommand::new(
        "undo",
        "Put the project's files back as they were before the last turn that changed them \
         (shell commands included); `/undo N` before turn N, `/undo list`, `--force`",
    )
    .input(AvailableCommandInput::Unstructured(
        UnstructuredCommandInput::new("N | list | --force"),
    ));
    SessionNotification::new(
        session_id.to_string(),
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(vec![undo])),
    )
}

/// The arguments of a `/undo` prompt (`None`: the prompt is not one).
pub fn args(text: &str) -> Option<Vec<&str>> {
    let mut words = text.split_whitespace();
    (words.next() == Some("/undo")).then(|| words.collect())
}

/// Do what `/undo ARGS` asks in `project` for `session`: the agent's reply, and the note for
/// the model when the project changed.
pub fn run(project: Option<&Project>, session: &str, args: &[&str]) -> (String, Option<String>) {
    let Some(p) = project else {
        return (
            "undo: checkpoints are off in this session ([checkpoints] enabled = false)".into(),
            None,
        );
    };
    let pick = |turn: Option<u64>| turn.map(Pick::Turn).unwrap_or(Pick::Last);
    match parse(args) {
        Err(e) => (e, None),
        Ok(UndoAsk::List) => match u::entries(p, session) {
            Ok(es) if es.is_empty() => (
                "no checkpoint in this session yet: none of its turns wrote a file".into(),
                None,
            ),
            Ok(es) => (
                es.iter()
                    .map(|e| crate::checkpoint::list::line(p, e))
                    .collect::<Vec<_>>()
                    .join("\n"),
                None,
            ),
            Err(e) => (format!("undo: {}", e.message()), None),
        },
        Ok(UndoAsk::Preview { turn, force } | UndoAsk::Apply { turn, force }) => {
            match u::run(p, session, pick(turn), force) {
                Ok(r) => (
                    crate::checkpoint::report::report_text(&r),
                    Some(u::note(&r, "/undo")),
                ),
                Err(e) => (format!("undo: {}", e.message()), None),
            }
        }
    }
}

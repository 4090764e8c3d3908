//! An undo's plan and its report in words, as `openmax undo`, the terminal UI's `/undo` and
//! ACP's `/undo` all print them.

use super::undo::{Plan, Report};

/// What an undo did, as lines.
pub fn report_text(r: &Report) -> String {
    let mut s = format!(
        "undid {} of session {}: the files are back as they were before turn {}\n",
        r.plan.what, r.plan.session, r.plan.to_turn
    );
    for st in &r.plan.steps {
        if let Some((_, e)) = r.failed.iter().find(|(p, _)| p == &st.path) {
            s.push_str(&format!("  not restored {}: {e}\n", st.path));
        } else {
            s.push_str(&format!("  {:<9} {}\n", st.verb(), st.path));
        }
    }
    s.push_str(&plan_tail(&r.plan));
    s.push_str("`openmax undo` again undoes this undo.\n");
    s
}

/// The kept and lost paths, `HEAD` and the notes of a plan, as lines.
pub fn plan_tail(plan: &Plan) -> String {
    let mut s = String::new();
    if !plan.kept.is_empty() {
        s.push_str("kept as they are (changed since by someone else; --force restores them):\n");
        for (p, why) in &plan.kept {
            s.push_str(&format!("  {p} ({why})\n"));
        }
    }
    if !plan.lost.is_empty() {
        s.push_str("cannot come back:\n");
        for (p, why) in &plan.lost {
            s.push_str(&format!("  {p} ({why})\n"));
        }
    }
    if let Some(h) = &plan.head {
        s.push_str(&format!("{h}\n"));
    }
    for n in &plan.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}

//! What the UI loop carries out for the person outside the wire: the questions only a human
//! can answer (trust this folder, approve a project source it is about to need: the stores of
//! `openmax --trust` and `openmax --approve`, behind the same human check), `/trust`,
//! `/approve`, `/model`, `/compact`, `/status` and `/cost`. Once the questions are answered and
//! something was granted, one `reload` makes the session take it up (the refreeze starts the
//! approved MCP servers and reads the trust again).
//!
//! The questions are asked at start-up of a human at a terminal (the same checks as
//! `--trust`: no `OPENMAX_AGENT_SESSION`, stdin a terminal, no openmax ancestor): first whether
//! to trust an untrusted folder, then, in a trusted one and unless the mode is `auto` (which
//! runs project sources without asking), one card per project MCP server, external tool and
//! hook whose bytes no human approved.

use openmax_core::machine::Input;
use openmax_core::usage::UsageTotals;
use openmax_core::wire::{ApprovalReason, Command, Mode};

use super::blocks::Level;
use super::card::ApprovalCard;
use super::view::{usd, Question, Request, View};
use super::Launch;
use crate::approvals::pending::{self, Pending};
use crate::extensions::source::short;
use crate::run::InputTx;

/// The questions to ask as the UI starts, or why none are asked.
pub fn startup(launch: &Launch) -> Result<Vec<Question>, String> {
    let trusted = launch.trusted || launch.state.trusted();
    if trusted && launch.mode == Mode::Auto {
        return Ok(Vec::new());
    }
    crate::human::check("asking")?;
    if !trusted {
        return Ok(vec![Question::Trust {
            project: launch.state.project().display().to_string(),
        }]);
    }
    Ok(sources(launch))
}

/// One question per project source waiting for approval.
fn sources(launch: &Launch) -> Vec<Question> {
    let state = &launch.state;
    let list = pending::list(
        &launch.home,
        state.project(),
        &|k, sha| state.source_approved(k, sha),
        &crate::extensions::is_reserved,
    );
    list.into_iter().enumerate().map(question).collect()
}

/// The card of a pending source: what an `unapproved_source` request shows for it.
fn question((i, p): (usize, Pending)) -> Question {
    let card = ApprovalCard {
        approval_id: format!("startup-{i}"),
        name: format!("{} {}", p.kind, p.name),
        summary: p.command.clone(),
        detail: format!("covers: {}", p.covers.join(", ")),
        reason: ApprovalReason::UnapprovedSource,
        source_path: p.source_path.clone(),
        source_sha: short(&p.sha256),
        env: p.env.clone(),
        answered: None,
        outcome: None,
    };
    Question::Source {
        card,
        key: p.key,
        sha256: p.sha256,
    }
}

/// The UI loop's side of the requests: what was granted since the last `reload`.
#[derive(Debug, Default)]
pub struct Carrier {
    granted: bool,
}

impl Carrier {
    /// Carry out `req`; notices go to `view`, inputs to the runtime.
    pub fn carry(&mut self, req: Request, launch: &Launch, view: &mut View, input: &InputTx) {
        match req {
            Request::Trust => self.trust(launch, view),
            Request::Answer { question, yes } => match *question {
                Question::Trust { .. } if yes => self.trust(launch, view),
                Question::Trust { .. } => {}
                Question::Source { .. } if !yes => {}
                Question::Source { card, key, sha256 } => {
                    match launch.state.approve_source(&key, &sha256) {
                        Ok(()) => {
                            self.granted = true;
                            view.notice(
                                Level::Info,
                                &format!(
                                    "approved {} ({} sha {}): these exact bytes may run",
                                    card.name, card.source_path, card.source_sha
                                ),
                            );
                        }
                        Err(e) => view.notice(
                            Level::Error,
                            &format!("could not save the approval of {}: {e}", card.name),
                        ),
                    }
                }
            },
            Request::Approve(file) => self.approve(launch, view, &file),
            Request::Model(model) => {
                launch.provider.set_model(&model);
                view.status.model = model.clone();
                let _ = input.send(Input::Notice {
                    text: format!("the model is now {model} (switched with /model)"),
                });
            }
            Request::Compact => {
                let _ = input.send(Input::Compact);
            }
            Request::Status => status(launch, view),
            Request::Cost => cost(view),
        }
        // Everything granted is taken up at once, after the last question.
        if self.granted && view.questions.is_empty() {
            self.granted = false;
            view.send_reload();
        }
    }

    fn trust(&mut self, launch: &Launch, view: &mut View) {
        let state = &launch.state;
        let project = state.project().display().to_string();
        if launch.trusted || state.trusted() {
            view.notice(Level::Info, &format!("{project} is trusted already"));
        } else if let Err(why) = crate::human::check("/trust") {
            view.notice(Level::Error, &why);
            return;
        } else if let Err(e) = state.set_trusted() {
            view.notice(Level::Error, &format!("could not trust {project}: {e}"));
            return;
        } else {
            self.granted = true;
            view.notice(
                Level::Info,
                &format!(
                    "trusted {project} (recorded in {}, as openmax --trust does)",
                    state.dir().display()
                ),
            );
        }
        if view.status.mode != Some(Mode::Auto) {
            view.ask(sources(launch));
        }
    }

    fn approve(&mut self, launch: &Launch, view: &mut View, file: &str) {
        if let Err(why) = crate::human::check("/approve") {
            view.notice(Level::Error, &why);
            return;
        }
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = crate::approvals::approve::approve_path(
            &launch.home,
            &launch.state,
            std::path::Path::new(file),
            &mut out,
            &mut err,
        );
        for line in String::from_utf8_lossy(&out).lines() {
            view.notice(Level::Info, line);
        }
        for line in String::from_utf8_lossy(&err).lines() {
            view.notice(Level::Error, line);
        }
        if code == 0 {
            self.granted = true;
        }
    }
}

fn status(launch: &Launch, view: &mut View) {
    let s = &view.status;
    let t = s.totals;
    let mut lines = vec![
        format!("model: {}", s.model),
        format!("mode: {}", s.mode.map(Mode::as_str).unwrap_or("unknown")),
        format!(
            "sandbox: {}",
            crate::sandbox::check::summary(&launch.sandbox.confine)
        ),
        format!("session: {}", launch.session_id),
        format!("project: {}", launch.state.project().display()),
        format!(
            "trusted: {}",
            if launch.trusted || launch.state.trusted() {
                "yes"
            } else {
                "no (/trust)"
            }
        ),
    ];
    if let Some((used, ctx)) = s.budget {
        lines.push(format!("context: {used} of {ctx} tokens"));
    }
    lines.push(format!("tokens this session: {}", tokens_line(&t)));
    if let Some(c) = s.cost() {
        lines.push(format!("cost this session: {}", usd(c)));
    }
    view.notice(Level::Info, &lines.join("\n"));
}

/// `in … out … cached … over N requests`.
fn tokens_line(t: &UsageTotals) -> String {
    format!(
        "in {} out {} cached {} over {} request{}",
        t.prompt_tokens,
        t.completion_tokens,
        t.cached_tokens.unwrap_or(0),
        t.requests,
        if t.requests == 1 { "" } else { "s" }
    )
}

/// `/cost`: the session's tokens, and their cost at the configured prices (or how to set
/// them).
fn cost(view: &mut View) {
    let s = &view.status;
    let mut text = format!("this session: {}", tokens_line(&s.totals));
    match s.prices {
        Some(p) => {
            text.push_str(&format!(
                "\ncost: {} (per million tokens: {} in, {} out, {} cached in)",
                usd(p.cost(&s.totals)),
                usd_price(p.input),
                usd_price(p.output),
                usd_price(p.cached_input.unwrap_or(p.input))
            ));
        }
        None => text.push_str(&format!(
            "\ncost: unknown; set price_in and price_out (USD per million tokens) under \
             [provider] in {} (docs/configuration.md)",
            crate::session::state::shown("config.toml")
        )),
    }
    view.notice(Level::Info, &text);
}

/// A price per million tokens, as written in the config (no trailing zeros).
fn usd_price(p: f64) -> String {
    format!("${p}")
}

impl View {
    /// Queue a `reload`.
    pub fn send_reload(&mut self) {
        self.commands.push(Command::Reload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::wire::Event;

    fn last_notice(view: &mut View) -> String {
        match view.take_finished().pop() {
            Some(super::super::blocks::Block::Notice(_, text)) => text,
            other => panic!("no notice: {other:?}"),
        }
    }

    #[test]
    fn cost_names_the_tokens_and_their_price_or_how_to_set_one() {
        let mut v = View::new("m", Mode::Ask, vec![]);
        v.event(
            0,
            Event::Usage {
                prompt_tokens: 2_000_000,
                completion_tokens: 100_000,
                cached_tokens: Some(1_000_000),
            },
        );
        cost(&mut v);
        let n = last_notice(&mut v);
        assert!(
            n.starts_with("this session: in 2000000 out 100000 cached 1000000 over 1 request\n"),
            "{n}"
        );
        assert!(
            n.contains("cost: unknown; set price_in and price_out"),
            "{n}"
        );
        v.status.prices = Some(openmax_core::usage::Prices {
            input: 3.0,
            output: 15.0,
            cached_input: None,
        });
        cost(&mut v);
        let n = last_notice(&mut v);
        // No cache discount configured: the cached million costs the input price.
        assert!(
            n.ends_with("cost: $7.50 (per million tokens: $3 in, $15 out, $3 cached in)"),
            "{n}"
        );
    }
}

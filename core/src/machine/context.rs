//! The context budget inside a turn: the `schemas_over_budget` advisory, the compaction forced
//! before a request goes out, and the one compaction and re-send after the provider refused a
//! request as too long for its window. The estimator, thresholds and prune algorithm are
//! [`crate::compaction`]'s; this module decides when they run and what is emitted.
//!
//! Decisions (the contract leaves them open):
//! - Every figure is scaled ([`Scale`], learned from the last completed request).
//! - `schemas_over_budget` is checked when a request is admitted and emitted at most once per
//!   session, before anything else that request emits (it is a neutral line, legal anywhere).
//! - A compaction that changes something is persisted as `Record::Compaction` (the whole
//!   compacted conversation) and only after the ack are `compacted`, the `compacted` hooks and
//!   the request emitted, so the request is always built on a compaction point already on disk
//!   and the receipt's `tokens_after` is exactly the scaled estimate of the body that goes out
//!   next (`Scale::apply(scale, estimate_body(body))`).
//! - A compaction forced by the estimate that finds nothing to cut (everything before the
//!   current turn is already gone or stubbed) emits nothing and the request goes out as is:
//!   the estimate is over the trigger, not necessarily over the window, so the provider has
//!   the last word.
//! - A provider context-length refusal (an HTTP error or an in-stream failure classified
//!   [`crate::provider::FailureKind::ContextLength`], before any reply text) forces one
//!   compaction, aiming at the smaller of the usual prune target and [`TARGET_PERCENT`]% of
//!   the refused body's scaled estimate (the provider just showed that the estimate
//!   undercounts), then re-sends the same request as its next attempt. That re-send is not a
//!   retry in the contract's sense: no `retry` line, and it goes out even after the last
//!   attempt of the budget; it does take the next attempt number, so a later retry of it
//!   counts on from there (and is refused once the budget is spent). A second refusal of the
//!   same request, a refusal after reply text, or a refusal when the system prompt and
//!   schemas alone fill the budget end the turn `error`: never a loop.
//! - The no-op receipt (`compacted_messages: 0`, `tokens_after == tokens_before`) is emitted
//!   only when a provider refusal forced a compaction that found nothing left to cut outside
//!   the current turn; the turn then ends `error` (an identical body would be refused again).
//! - `cancel` while the compaction point is being written waits for the ack (the receipt
//!   still goes out), then ends the turn `cancelled`; a failed write fails the turn.

use crate::compaction::{self, Receipt, Scale, Verdict, TARGET_PERCENT};
use crate::conversation::ModelRequest;
use crate::record::Record;
use crate::wire::Event;

use super::phase::{AfterCompaction, AfterPersist};
use super::turn::Attempt;
use super::{Core, HookEvent};

impl Core {
    /// The next request of the turn is admitted: advise about the schemas (once), compact when
    /// the estimate crosses the trigger, then send.
    pub(super) fn admit_request(&mut self) {
        let (system, schemas) = self.fixed_scaled();
        self.advise_schemas(system, schemas);
        let estimate = self.scaled_estimate();
        match compaction::verdict(self.config.context_tokens, estimate, system + schemas) {
            Verdict::Fits | Verdict::SchemasFill => self.send_new_request(),
            Verdict::Compact { target } => {
                let receipt = self.compact_to(target);
                if receipt.compacted_messages == 0 {
                    self.send_new_request();
                } else {
                    self.persist_compaction(receipt, AfterCompaction::NewRequest);
                }
            }
        }
    }

    /// A compaction the person asked for ([`super::Input::Compact`]): between turns only. The
    /// pruned conversation is written first; only once it is on disk does it replace the
    /// conversation and the receipt go out (client input is held meanwhile). A failed write
    /// changes nothing and says so.
    pub(super) fn on_compact(&mut self) {
        if self.busy() {
            return self.protocol_error("compact: a turn is in flight; compact after its done");
        }
        let (system, schemas) = self.fixed_scaled();
        let estimate = self.scaled_estimate();
        let target = compaction::prune_target(self.config.context_tokens, system + schemas)
            .min(estimate * TARGET_PERCENT / 100);
        let mut messages = self.conversation.clone();
        let fixed =
            compaction::estimate_fixed(&self.config.freeze.system, &self.config.freeze.tools);
        // No turn is running: every message may be pruned.
        let current = messages.len();
        let receipt = compaction::compact(&mut messages, current, fixed, self.scale, target);
        if receipt.compacted_messages == 0 {
            return self.emit_receipt(receipt);
        }
        let ticket = self.persist(vec![Record::Compaction {
            messages: messages.clone(),
            tokens_before: receipt.tokens_before,
            tokens_after: receipt.tokens_after,
            compacted_messages: receipt.compacted_messages,
        }]);
        self.gate.compacting = Some(super::gate::Compacting {
            ticket,
            messages,
            receipt,
        });
    }

    /// The answer to the write of an asked-for compaction point (`Err`: why it failed). `false`
    /// when `ticket` is not that write.
    pub(super) fn compaction_written(&mut self, ticket: u64, failed: Option<&str>) -> bool {
        if self.gate.compacting.as_ref().map(|c| c.ticket) != Some(ticket) {
            return false;
        }
        let Some(c) = self.gate.compacting.take() else {
            return false;
        };
        match failed {
            None => {
                self.conversation = c.messages;
                self.emit_receipt(c.receipt);
            }
            Some(message) => self.protocol_error(format!(
                "compact: the compaction point could not be written ({message}); nothing was \
                 compacted"
            )),
        }
        true
    }

    /// The provider refused attempt `a` as too long for its window.
    pub(super) fn context_exceeded(&mut self, a: Attempt, message: String) {
        if !a.text.is_empty() {
            // Reply text already streamed: the request can never be resent.
            return self.fail_turn(format!(
                "the reply stream failed: the prompt exceeded the model's context window: \
                 {message}"
            ));
        }
        if self.turn.context_retried {
            return self.fail_turn(format!(
                "the prompt exceeded the model's context window again after compaction: \
                 {message}"
            ));
        }
        self.turn.context_retried = true;
        let (system, schemas) = self.fixed_scaled();
        let fixed = system + schemas;
        let context_tokens = self.config.context_tokens;
        if fixed >= compaction::budget(context_tokens) {
            return self.fail_turn(format!(
                "the prompt exceeded the model's context window, and the system prompt and \
                 tool schemas alone ({fixed} estimated tokens) fill the budget, so compaction \
                 cannot help: {message}"
            ));
        }
        let refused = Scale::apply(self.scale, self.turn.body_estimate);
        let target =
            compaction::prune_target(context_tokens, fixed).min(refused * TARGET_PERCENT / 100);
        let receipt = self.compact_to(target);
        if receipt.compacted_messages == 0 {
            self.emit_receipt(receipt);
            self.fail_turn(format!(
                "the prompt exceeded the model's context window and nothing outside the \
                 current turn is left to cut: {message}"
            ));
        } else {
            self.persist_compaction(
                receipt,
                AfterCompaction::Resend {
                    request: a.request,
                    attempt: a.attempt + 1,
                },
            );
        }
    }

    /// The compaction point is on disk: the receipt, the hooks, then the request.
    pub(super) fn after_compaction(&mut self, receipt: Receipt, next: AfterCompaction) {
        self.emit_receipt(receipt);
        if let Some(stop) = self.turn.ending.clone() {
            return self.end_turn(stop);
        }
        match next {
            AfterCompaction::NewRequest => self.send_new_request(),
            AfterCompaction::Resend { request, attempt } => {
                self.set_body();
                self.send_attempt(request, attempt);
            }
        }
    }

    /// Build the current request's body from the freeze and the conversation, and remember
    /// its unscaled estimate (for the scale learned from the reply).
    pub(super) fn set_body(&mut self) {
        let freeze = &self.config.freeze;
        let body = ModelRequest::shaped(&freeze.system, &freeze.tools, &self.conversation);
        self.turn.body_estimate = compaction::estimate_body(&body);
        self.turn.body = Some(Box::new(body));
    }

    /// The scaled estimate of the request the conversation would make now.
    pub(super) fn scaled_estimate(&self) -> u64 {
        Scale::apply(
            self.scale,
            compaction::estimate_request(
                &self.config.freeze.system,
                &self.config.freeze.tools,
                &self.conversation,
            ),
        )
    }

    /// The scaled system prompt and schemas.
    fn fixed_scaled(&self) -> (u64, u64) {
        (
            Scale::apply(
                self.scale,
                compaction::estimate_text(&self.config.freeze.system),
            ),
            Scale::apply(
                self.scale,
                compaction::estimate_schemas(&self.config.freeze.tools),
            ),
        )
    }

    fn advise_schemas(&mut self, system: u64, schemas: u64) {
        if self.schemas_advised {
            return;
        }
        let budget_tokens = compaction::budget_tokens(self.config.context_tokens, system);
        if compaction::schemas_over_budget(schemas, budget_tokens) {
            self.schemas_advised = true;
            self.ev(Event::SchemasOverBudget {
                schema_tokens: schemas,
                budget_tokens,
            });
        }
    }

    /// Prune the conversation (outside the current turn) to `target`, keeping the turn's
    /// start index right.
    fn compact_to(&mut self, target: u64) -> Receipt {
        let fixed =
            compaction::estimate_fixed(&self.config.freeze.system, &self.config.freeze.tools);
        let before = self.conversation.len();
        let receipt = compaction::compact(
            &mut self.conversation,
            self.turn.start,
            fixed,
            self.scale,
            target,
        );
        self.turn.start -= before - self.conversation.len();
        receipt
    }

    fn persist_compaction(&mut self, receipt: Receipt, next: AfterCompaction) {
        let record = Record::Compaction {
            messages: self.conversation.clone(),
            tokens_before: receipt.tokens_before,
            tokens_after: receipt.tokens_after,
            compacted_messages: receipt.compacted_messages,
        };
        self.persist_then(vec![record], AfterPersist::Compaction { receipt, next });
    }

    fn emit_receipt(&mut self, r: Receipt) {
        self.ev(Event::Compacted {
            tokens_before: r.tokens_before,
            tokens_after: r.tokens_after,
            compacted_messages: r.compacted_messages,
        });
        self.fire_observe(
            HookEvent::Compacted,
            None,
            serde_json::json!({
                "tokens_before": r.tokens_before,
                "tokens_after": r.tokens_after,
                "compacted_messages": r.compacted_messages,
            }),
        );
    }
}

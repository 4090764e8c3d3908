//! Retry policy of model requests: which failures are retried, in what words the `retry`
//! event names them, and the backoff with seeded jitter ([`SplitMix64`]).
//!
//! Invariants (the contract's `retry` paragraph):
//! - retried: transport failures, HTTP 429/500/502/503/504/529, and — only before any reply
//!   text of the attempt — a stream that ended without completion, stalled, was damaged (an
//!   event that is not valid JSON or Unicode), or failed with a rate limit, an overload or a
//!   server fault;
//! - never retried: a Retry-After over 60 s, `insufficient_quota`, other statuses, other
//!   in-stream failure kinds;
//! - the wait is `min(base * 2^(attempt-1), max)` less jitter of up to 25%, or the
//!   Retry-After when that is longer.

use crate::provider::errors::{snippet, MESSAGE_CHARS};
use crate::provider::{FailureKind, RequestFailure};

use super::interface::RetrySettings;
use crate::rng::SplitMix64;

/// The longest Retry-After (seconds) that is still honored by waiting.
pub(super) const MAX_RETRY_AFTER_S: u64 = 60;

/// Consecutive attempts that never reached the endpoint before the request gives up.
pub(super) const UNREACHABLE_LIMIT: u32 = 3;

/// What to do about a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Retry (budget permitting) after at least `min_wait_ms`.
    Retry {
        /// Why, for the `retry` line.
        reason: String,
        /// The shortest wait allowed (Retry-After, in ms).
        min_wait_ms: u64,
        /// The attempt never reached the endpoint (counts toward [`UNREACHABLE_LIMIT`]).
        unreachable: bool,
    },
    /// Fail the turn at once with this error message.
    Fail {
        /// The `error` line's message.
        message: String,
    },
    /// The prompt did not fit the model's window (the compaction hook).
    ContextExceeded {
        /// The server's message.
        message: String,
    },
}

/// Classify a request that produced no stream.
pub(super) fn classify_request_failure(f: &RequestFailure) -> Verdict {
    match f {
        RequestFailure::Unreachable { detail } => Verdict::Retry {
            reason: if detail.trim().is_empty() {
                "the endpoint could not be reached".to_string()
            } else {
                detail.clone()
            },
            min_wait_ms: 0,
            unreachable: true,
        },
        RequestFailure::Transport { detail } => Verdict::Retry {
            reason: if detail.trim().is_empty() {
                "transport failure".to_string()
            } else {
                format!("transport failure: {detail}")
            },
            min_wait_ms: 0,
            unreachable: false,
        },
        RequestFailure::Http {
            status,
            retry_after_s,
            kind,
            message,
        } => {
            if *kind == FailureKind::ContextLength {
                return Verdict::ContextExceeded {
                    message: message.clone(),
                };
            }
            if *kind == FailureKind::InsufficientQuota {
                return Verdict::Fail {
                    message: format!(
                        "HTTP {status}: the provider reports an exhausted quota \
                         (insufficient_quota); not retrying: {message}"
                    ),
                };
            }
            if !RequestFailure::RETRYABLE_STATUS.contains(status) {
                return Verdict::Fail {
                    message: format!("HTTP {status}: {message}"),
                };
            }
            match retry_after_s {
                Some(s) if *s > MAX_RETRY_AFTER_S => Verdict::Fail {
                    message: format!(
                        "HTTP {status}: the server asked to wait {s} s; not retrying \
                         (waits over {MAX_RETRY_AFTER_S} s are not honored): {message}"
                    ),
                },
                other => Verdict::Retry {
                    reason: http_reason(*status, message),
                    min_wait_ms: other.unwrap_or(0).saturating_mul(1000),
                    unreachable: false,
                },
            }
        }
    }
}

/// A retried status in the server's words: `HTTP 503: <message>` (capped), or the message
/// alone when it already names the status (`HTTP 502 Bad Gateway`). Both the `retry` reason
/// and, once the budget is spent, the final error carry it.
fn http_reason(status: u16, message: &str) -> String {
    let message = snippet(message.trim(), MESSAGE_CHARS);
    if message.is_empty() {
        format!("HTTP {status}")
    } else if message.starts_with(&format!("HTTP {status}")) {
        message
    } else {
        format!("HTTP {status}: {message}")
    }
}

/// Classify a failure the provider reported inside the stream. `had_text`: reply text of
/// this attempt already streamed.
pub(super) fn classify_stream_failure(kind: FailureKind, message: &str, had_text: bool) -> Verdict {
    if kind == FailureKind::ContextLength {
        return Verdict::ContextExceeded {
            message: message.to_string(),
        };
    }
    if kind == FailureKind::InsufficientQuota {
        return Verdict::Fail {
            message: format!(
                "the provider reports an exhausted quota (insufficient_quota); not retrying: \
                 {message}"
            ),
        };
    }
    if !had_text && kind.retryable() {
        let what = match kind {
            FailureKind::RateLimit => "rate limited",
            FailureKind::Overloaded => "overloaded",
            FailureKind::Server => "server error",
            FailureKind::Corrupt
            | FailureKind::InsufficientQuota
            | FailureKind::ContextLength
            | FailureKind::Other => "failure",
        };
        let reason = if kind == FailureKind::Corrupt {
            format!("the stream was damaged before any reply text: {message}")
        } else {
            format!(
                "the provider reported {what} before any reply text: {}",
                snippet(message, MESSAGE_CHARS)
            )
        };
        return Verdict::Retry {
            reason,
            min_wait_ms: 0,
            unreachable: false,
        };
    }
    if kind == FailureKind::Corrupt {
        return Verdict::Fail {
            message: format!("the reply stream was damaged: {message}"),
        };
    }
    Verdict::Fail {
        message: format!("the provider failed the reply: {message}"),
    }
}

/// The backoff after attempt `failed_attempt` (1-based): `min(base * 2^(n-1), max)` less a
/// seeded jitter of up to 25%, so the nominal figure is the most it waits (the OpenAI and
/// Anthropic SDKs jitter the same way). With the defaults (200 ms, 8 s) two transient
/// failures cost at most 600 ms of waiting.
pub(super) fn backoff_ms(
    settings: &RetrySettings,
    failed_attempt: u32,
    rng: &mut SplitMix64,
) -> u64 {
    let shift = failed_attempt.saturating_sub(1).min(63);
    let exp = settings
        .retry_base_ms
        .saturating_mul(1u64.checked_shl(shift).unwrap_or(u64::MAX));
    let base = exp.min(settings.retry_max_ms);
    let jitter_max = base / 4;
    let jitter = if jitter_max == 0 {
        0
    } else {
        rng.next_u64() % (jitter_max + 1)
    };
    base - jitter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let s = RetrySettings {
            max_attempts: 5,
            retry_base_ms: 1000,
            retry_max_ms: 5000,
            stream_idle_timeout_ms: 0,
        };
        let mut r = SplitMix64::new(7);
        let b1 = backoff_ms(&s, 1, &mut r);
        assert!((750..=1000).contains(&b1));
        let b2 = backoff_ms(&s, 2, &mut r);
        assert!((1500..=2000).contains(&b2));
        let b9 = backoff_ms(&s, 90, &mut r);
        assert!((3750..=5000).contains(&b9));
    }

    /// The jitter spans the whole quarter, both ends included: over many seeds the first
    /// backoff of 200 ms takes every value from 150 to 200 ms.
    #[test]
    fn the_jitter_covers_a_quarter_of_the_backoff_both_ends_included() {
        let s = RetrySettings::default();
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..5_000 {
            seen.insert(backoff_ms(&s, 1, &mut SplitMix64::new(seed)));
        }
        assert_eq!(seen.first(), Some(&150));
        assert_eq!(seen.last(), Some(&200));
        assert_eq!(seen.len(), 51, "every value between");
        // A backoff under 4 ms has no jitter to take.
        let tiny = RetrySettings {
            retry_base_ms: 3,
            ..RetrySettings::default()
        };
        assert_eq!(backoff_ms(&tiny, 1, &mut SplitMix64::new(1)), 3);
    }

    #[test]
    fn two_transient_failures_wait_at_most_600_ms_by_default() {
        let s = RetrySettings::default();
        for seed in 0..200 {
            let mut r = SplitMix64::new(seed);
            let waited = backoff_ms(&s, 1, &mut r) + backoff_ms(&s, 2, &mut r);
            assert!((450..=600).contains(&waited), "seed {seed}: {waited} ms");
        }
    }

    #[test]
    fn classification() {
        let v = classify_request_failure(&RequestFailure::Http {
            status: 503,
            retry_after_s: Some(120),
            kind: FailureKind::Other,
            message: "busy".into(),
        });
        assert!(matches!(v, Verdict::Fail { ref message } if message.contains("wait 120 s")));
        let v = classify_request_failure(&RequestFailure::Http {
            status: 400,
            retry_after_s: None,
            kind: FailureKind::Other,
            message: "bad".into(),
        });
        assert!(matches!(v, Verdict::Fail { .. }));
        assert!(matches!(
            classify_stream_failure(FailureKind::Overloaded, "x", true),
            Verdict::Fail { .. }
        ));
        assert!(matches!(
            classify_stream_failure(FailureKind::Overloaded, "x", false),
            Verdict::Retry { .. }
        ));
    }

    #[test]
    fn retried_statuses_carry_the_servers_message() {
        let v = classify_request_failure(&RequestFailure::Http {
            status: 429,
            retry_after_s: None,
            kind: FailureKind::RateLimit,
            message: "Rate limit reached for gpt-4.1 on tokens per min".into(),
        });
        assert!(matches!(v, Verdict::Retry { ref reason, .. }
            if reason == "HTTP 429: Rate limit reached for gpt-4.1 on tokens per min"));
        let v = classify_request_failure(&RequestFailure::Http {
            status: 502,
            retry_after_s: None,
            kind: FailureKind::Server,
            message: "HTTP 502 Bad Gateway".into(),
        });
        assert!(matches!(v, Verdict::Retry { ref reason, .. } if reason == "HTTP 502 Bad Gateway"));
        let v = classify_request_failure(&RequestFailure::Http {
            status: 503,
            retry_after_s: None,
            kind: FailureKind::Server,
            message: "y".repeat(5000),
        });
        assert!(matches!(v, Verdict::Retry { ref reason, .. }
            if reason.chars().count() < MESSAGE_CHARS + 20));
    }

    #[test]
    fn a_damaged_stream_is_retried_before_text_and_fails_after() {
        assert!(matches!(
            classify_stream_failure(FailureKind::Corrupt, "cut", false),
            Verdict::Retry { ref reason, .. } if reason.contains("damaged") && reason.contains("cut")
        ));
        assert!(matches!(
            classify_stream_failure(FailureKind::Corrupt, "cut", true),
            Verdict::Fail { ref message } if message.contains("damaged") && message.contains("cut")
        ));
    }
}

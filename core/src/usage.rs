//! Token usage summed over a run, and what it cost: the one computation every frontend shares
//! (`-p --output-format json` reports it; a status line can show the same figures).
//!
//! - [`UsageTotals`] adds up `usage` events: prompt, completion and cached tokens, and how many
//!   replies reported them.
//! - [`Prices`] are USD per million tokens, from the user's `[provider] price_in`,
//!   `price_out` and (optionally) `price_cached_in`; [`Prices::cost`] is the run's cost.
//!
//! What the numbers mean: every provider adapter reports `prompt_tokens` with the cached
//! tokens included (Anthropic's `input_tokens + cache_read + cache_creation`, OpenAI's
//! `input_tokens`), and `cached_tokens` as the part of it read from the cache. So the cost of
//! one reply is `(prompt − cached) × price_in + cached × price_cached_in + completion ×
//! price_out`, over a million; `price_cached_in` defaults to `price_in` (no discount assumed).
//! Only replies the core kept report usage: an attempt that failed and was retried reports
//! none, so its tokens are not counted.

use crate::wire::Event;

/// Usage summed over every `usage` event of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Prompt tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Cached prompt tokens; `None` while no reply reported them.
    pub cached_tokens: Option<u64>,
    /// How many replies reported usage (one per model request whose reply was kept).
    pub requests: u64,
}

impl UsageTotals {
    /// Add one reply's usage.
    pub fn add(&mut self, prompt_tokens: u64, completion_tokens: u64, cached_tokens: Option<u64>) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(completion_tokens);
        if let Some(c) = cached_tokens {
            self.cached_tokens = Some(self.cached_tokens.unwrap_or(0).saturating_add(c));
        }
        self.requests += 1;
    }

    /// Add `event` when it is a `usage` event; whether it was.
    pub fn observe(&mut self, event: &Event) -> bool {
        match event {
            Event::Usage {
                prompt_tokens,
                completion_tokens,
                cached_tokens,
            } => {
                self.add(*prompt_tokens, *completion_tokens, *cached_tokens);
                true
            }
            _ => false,
        }
    }
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// Prompt tokens not read from the cache.
    pub input: f64,
    /// Completion tokens.
    pub output: f64,
    /// Prompt tokens read from the cache; `None`: the same as `input`.
    pub cached_input: Option<f64>,
}

impl Prices {
    /// The cost in USD of `usage` at these prices.
    pub fn cost(&self, usage: &UsageTotals) -> f64 {
        let cached = usage.cached_tokens.unwrap_or(0).min(usage.prompt_tokens);
        let fresh = usage.prompt_tokens - cached;
        let cached_price = self.cached_input.unwrap_or(self.input);
        (fresh as f64 * self.input
            + cached as f64 * cached_price
            + usage.completion_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(p: u64, c: u64, cached: Option<u64>) -> Event {
        Event::Usage {
            prompt_tokens: p,
            completion_tokens: c,
            cached_tokens: cached,
        }
    }

    #[test]
    fn totals_sum_every_usage_event_and_keep_unknown_cache_unknown() {
        let mut t = UsageTotals::default();
        assert!(t.observe(&usage(100, 10, None)));
        assert_eq!(t.cached_tokens, None);
        assert!(!t.observe(&Event::Token { text: "x".into() }));
        assert!(t.observe(&usage(200, 20, Some(150))));
        assert!(t.observe(&usage(300, 30, Some(0))));
        assert_eq!(
            t,
            UsageTotals {
                prompt_tokens: 600,
                completion_tokens: 60,
                cached_tokens: Some(150),
                requests: 3,
            }
        );
    }

    #[test]
    fn cost_prices_cached_tokens_apart_and_defaults_them_to_the_input_price() {
        let u = UsageTotals {
            prompt_tokens: 1_000_000,
            completion_tokens: 500_000,
            cached_tokens: Some(400_000),
            requests: 2,
        };
        let p = Prices {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
        };
        // 600k fresh × 3 + 400k cached × 0.3 + 500k out × 15, per million.
        assert!(
            (p.cost(&u) - (1.8 + 0.12 + 7.5)).abs() < 1e-9,
            "{}",
            p.cost(&u)
        );
        let p = Prices {
            cached_input: None,
            ..p
        };
        assert!((p.cost(&u) - (3.0 + 7.5)).abs() < 1e-9);
        // More cached than prompt tokens (a confused server) never goes negative.
        let odd = UsageTotals {
            prompt_tokens: 10,
            completion_tokens: 0,
            cached_tokens: Some(50),
            requests: 1,
        };
        assert!(p.cost(&odd) >= 0.0);
        assert_eq!(p.cost(&UsageTotals::default()), 0.0);
    }
}

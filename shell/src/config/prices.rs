//! `[provider] price_in`, `price_out`, `price_cached_in`: USD per million tokens, which make
//! the cost of a run known ([`openmax_core::usage::Prices::cost`] computes it).
//!
//! Invariants:
//! - Prices are the user's own: they describe the user's account with the provider, which only
//!   the user's config chooses, so a project config naming one is refused ([`super::narrow`])
//!   rather than trusted to report what the user pays.
//! - `price_in` and `price_out` come together (one without the other is an error, not a
//!   silently unknown cost); `price_cached_in` needs them and defaults to `price_in`.
//! - Every price is a finite number ≥ 0.

use openmax_core::usage::Prices;

use super::error::ConfigError;
use super::file::ProviderSection;

/// The price keys, as the errors name them.
pub const KEYS: [&str; 3] = ["price_in", "price_out", "price_cached_in"];

/// The prices `p` sets, if any.
pub fn resolve(p: &ProviderSection) -> Result<Option<Prices>, ConfigError> {
    for (key, v) in KEYS
        .iter()
        .zip([p.price_in, p.price_out, p.price_cached_in])
    {
        if let Some(v) = v {
            if !v.is_finite() || v < 0.0 {
                return Err(ConfigError(format!(
                    "[provider] {key} = {v} must be a non-negative number (USD per million \
                     tokens)"
                )));
            }
        }
    }
    match (p.price_in, p.price_out) {
        (Some(input), Some(output)) => Ok(Some(Prices {
            input,
            output,
            cached_input: p.price_cached_in,
        })),
        (None, None) if p.price_cached_in.is_none() => Ok(None),
        (None, None) => Err(ConfigError(
            "[provider] price_cached_in needs price_in and price_out (USD per million tokens)"
                .into(),
        )),
        (Some(_), None) | (None, Some(_)) => Err(ConfigError(
            "[provider] price_in and price_out go together (USD per million prompt and \
             completion tokens): set both, or neither to leave the cost unknown"
                .into(),
        )),
    }
}

/// The price key a project's `[provider]` names, if any (refused: prices are user config).
pub fn named_by(p: &ProviderSection) -> Option<&'static str> {
    KEYS.iter()
        .zip([p.price_in, p.price_out, p.price_cached_in])
        .find_map(|(k, v)| v.map(|_| *k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(i: Option<f64>, o: Option<f64>, c: Option<f64>) -> ProviderSection {
        ProviderSection {
            price_in: i,
            price_out: o,
            price_cached_in: c,
            ..ProviderSection::default()
        }
    }

    #[test]
    fn both_prices_or_none_and_never_negative() {
        assert_eq!(resolve(&section(None, None, None)), Ok(None));
        assert_eq!(
            resolve(&section(Some(3.0), Some(15.0), None)),
            Ok(Some(Prices {
                input: 3.0,
                output: 15.0,
                cached_input: None
            }))
        );
        assert_eq!(
            resolve(&section(Some(3.0), Some(15.0), Some(0.3)))
                .unwrap()
                .unwrap()
                .cached_input,
            Some(0.3)
        );
        for bad in [
            section(Some(3.0), None, None),
            section(None, Some(3.0), None),
            section(None, None, Some(0.3)),
            section(Some(-1.0), Some(1.0), None),
            section(Some(f64::NAN), Some(1.0), None),
        ] {
            let e = resolve(&bad).unwrap_err().0;
            assert!(e.contains("[provider] price_"), "{e}");
        }
        // Each key: zero is a price (a free local model), a negative or non-finite one is not.
        for (i, key) in KEYS.iter().enumerate() {
            let with = |v: f64| {
                let mut p = [Some(1.0), Some(2.0), Some(0.5)];
                p[i] = Some(v);
                section(p[0], p[1], p[2])
            };
            assert!(
                resolve(&with(0.0)).unwrap().is_some(),
                "{key} = 0 is allowed"
            );
            for bad in [-0.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                let e = resolve(&with(bad)).unwrap_err().0;
                assert!(e.starts_with(&format!("[provider] {key} = ")), "{key}: {e}");
            }
        }
        assert_eq!(named_by(&section(None, None, None)), None);
        assert_eq!(named_by(&section(None, Some(1.0), None)), Some("price_out"));
    }
}

//! [`SplitMix64`]: the one seeded PRNG of the project (the core's backoff jitter, the
//! simulator's case seeds, reproducible test data). Deterministic per seed; no entropy source.

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, seedable generator.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The generator's state step (the golden ratio in 64 bits).
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The generator whose first value is the `k`-th value of the one seeded with `seed` (a
    /// seekable stream: case `k` of a run seeded `seed` gets its own seed this way).
    pub fn at(seed: u64, k: u64) -> SplitMix64 {
        SplitMix64::new(seed.wrapping_add(k.wrapping_mul(Self::GAMMA)))
    }

    /// The next value of the sequence.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_sequence() {
        // The first outputs for seed 0 from the published reference implementation.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn at_seeks_the_stream() {
        let mut r = SplitMix64::new(7);
        let third = (0..3).map(|_| r.next_u64()).last();
        assert_eq!(Some(SplitMix64::at(7, 2).next_u64()), third);
    }
}

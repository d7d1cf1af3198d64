//! A deterministic pseudo-random sequence (xorshift) for the operators' randomized tests, so
//! that a failure replays from its seed.

pub(crate) struct Random(pub(crate) u64);

impl Random {
    /// A sequence for `seed` (any seed, 0 too).
    pub(crate) fn seeded(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next number, below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

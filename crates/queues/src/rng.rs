//! The per-thread random number generator the Random policies use.
//!
//! DiBella et al. blamed part of the gap between their Random and Primary/Random policies on
//! slow random numbers; a xorshift step is a handful of instructions, so experiment E9 can
//! check whether the gap vanishes. Every generator is seeded explicitly so runs and tests are
//! reproducible.

/// Marsaglia's xorshift64* generator: tiny state, no allocation, not cryptographic.
///
/// ```
/// use partita_queues::XorShift64;
/// let mut a = XorShift64::new(7);
/// let mut b = XorShift64::new(7);
/// assert_eq!(a.next_u64(), b.next_u64()); // same seed, same stream
/// assert!(a.below(3) < 3);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// Creates a generator from `seed`. Any seed is fine, including 0: it is first mixed with
    /// splitmix64, which never yields the all-zero state xorshift cannot leave.
    ///
    /// ```
    /// let mut r = partita_queues::XorShift64::new(0);
    /// assert_ne!(r.next_u64(), 0);
    /// ```
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self {
            state: if z == 0 { 0x2545_F491_4F6C_DD1D } else { z },
        }
    }

    /// Derives the generator of stream `stream` (a producer or consumer id) from a run seed,
    /// so different threads of one run draw independent-looking sequences.
    ///
    /// ```
    /// use partita_queues::XorShift64;
    /// assert_ne!(XorShift64::for_stream(1, 0).next_u64(), XorShift64::for_stream(1, 1).next_u64());
    /// ```
    pub fn for_stream(seed: u64, stream: usize) -> Self {
        Self::new(seed ^ (stream as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
    }

    /// The next 64 random bits.
    ///
    /// ```
    /// let mut r = partita_queues::XorShift64::new(1);
    /// let (x, y) = (r.next_u64(), r.next_u64());
    /// assert_ne!(x, y);
    /// ```
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform number in `0..n` (Lemire's multiply-shift; `n` must be at least 1, and 0 is
    /// returned for `n == 0` rather than panicking).
    ///
    /// ```
    /// let mut r = partita_queues::XorShift64::new(3);
    /// for _ in 0..100 { assert!(r.below(5) < 5); }
    /// assert_eq!(r.below(0), 0);
    /// ```
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

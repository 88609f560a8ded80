//! An order-sensitive 64-bit checksum of a result (FNV-1a over 64-bit words, finalised with
//! SplitMix64), so that any single changed bit of a result changes it.

/// Incremental checksum over 64-bit words.
///
/// ```
/// use partita_workloads::Checksum;
/// let mut a = Checksum::new();
/// a.f64(1.5);
/// a.u64(7);
/// let mut b = Checksum::new();
/// b.f64(1.5);
/// b.u64(8);
/// assert_ne!(a.finish(), b.finish());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checksum(u64);

impl Default for Checksum {
    fn default() -> Self {
        Self::new()
    }
}

impl Checksum {
    /// An empty checksum.
    pub fn new() -> Self {
        Checksum(0xcbf2_9ce4_8422_2325)
    }

    /// Add a word.
    #[inline]
    pub fn u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x0000_0100_0000_01b3);
    }

    /// Add a floating-point value by its exact bit pattern.
    #[inline]
    pub fn f64(&mut self, x: f64) {
        self.u64(x.to_bits());
    }

    /// The checksum value.
    pub fn finish(&self) -> u64 {
        crate::splitmix(self.0)
    }
}

//! A set of up to [`MAX_CPUS`] CPU numbers as a plain bitset, the shape the control page stores.

use std::fmt;

/// Largest number of CPUs a control page can describe (CPU numbers `0..MAX_CPUS`).
pub const MAX_CPUS: usize = 1024;
/// Number of 64-bit words in a [`CpuSet`].
pub const CPUSET_WORDS: usize = MAX_CPUS / 64;

/// A set of CPU numbers below [`MAX_CPUS`].
///
/// ```
/// use partita_protocol::CpuSet;
/// let set: CpuSet = [0, 1, 2, 5].into_iter().collect();
/// assert_eq!(set.len(), 4);
/// assert_eq!(set.to_string(), "0-2,5");
/// assert_eq!("0-2,5".parse::<CpuSet>().unwrap(), set);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CpuSet {
    words: [u64; CPUSET_WORDS],
}

impl CpuSet {
    /// The empty set.
    ///
    /// ```
    /// assert!(partita_protocol::CpuSet::new().is_empty());
    /// ```
    pub const fn new() -> Self {
        CpuSet {
            words: [0; CPUSET_WORDS],
        }
    }

    /// Build from raw words (bit `i % 64` of word `i / 64` is CPU `i`).
    ///
    /// ```
    /// let mut w = [0u64; partita_protocol::cpuset::CPUSET_WORDS];
    /// w[0] = 0b101;
    /// assert_eq!(partita_protocol::CpuSet::from_words(w).to_vec(), vec![0, 2]);
    /// ```
    pub const fn from_words(words: [u64; CPUSET_WORDS]) -> Self {
        CpuSet { words }
    }

    /// The raw words.
    ///
    /// ```
    /// let s: partita_protocol::CpuSet = [64].into_iter().collect();
    /// assert_eq!(s.words()[1], 1);
    /// ```
    pub const fn words(&self) -> &[u64; CPUSET_WORDS] {
        &self.words
    }

    /// Add `cpu`; returns `false` (and does nothing) when `cpu >= MAX_CPUS`.
    ///
    /// ```
    /// let mut s = partita_protocol::CpuSet::new();
    /// assert!(s.insert(3));
    /// assert!(!s.insert(5000));
    /// ```
    pub fn insert(&mut self, cpu: usize) -> bool {
        if cpu >= MAX_CPUS {
            return false;
        }
        self.words[cpu / 64] |= 1 << (cpu % 64);
        true
    }

    /// Remove `cpu`.
    ///
    /// ```
    /// let mut s: partita_protocol::CpuSet = [1, 2].into_iter().collect();
    /// s.remove(1);
    /// assert_eq!(s.to_vec(), vec![2]);
    /// ```
    pub fn remove(&mut self, cpu: usize) {
        if cpu < MAX_CPUS {
            self.words[cpu / 64] &= !(1 << (cpu % 64));
        }
    }

    /// Whether `cpu` is in the set.
    ///
    /// ```
    /// let s: partita_protocol::CpuSet = [7].into_iter().collect();
    /// assert!(s.contains(7) && !s.contains(6));
    /// ```
    pub fn contains(&self, cpu: usize) -> bool {
        cpu < MAX_CPUS && self.words[cpu / 64] & (1 << (cpu % 64)) != 0
    }

    /// Add every CPU of `other` (set union, in place).
    ///
    /// ```
    /// let mut a: partita_protocol::CpuSet = [0, 1].into_iter().collect();
    /// a.union_with(&[1, 70].into_iter().collect());
    /// assert_eq!(a.to_vec(), vec![0, 1, 70]);
    /// ```
    pub fn union_with(&mut self, other: &CpuSet) {
        for (w, o) in self.words.iter_mut().zip(other.words.iter()) {
            *w |= o;
        }
    }

    /// The CPUs of `self` that are not in `other`.
    ///
    /// ```
    /// let set = |v: &[usize]| v.iter().copied().collect::<partita_protocol::CpuSet>();
    /// assert_eq!(set(&[0, 1, 70]).without(&set(&[1, 2])), set(&[0, 70]));
    /// ```
    pub fn without(&self, other: &CpuSet) -> CpuSet {
        let mut rest = *self;
        for (w, o) in rest.words.iter_mut().zip(other.words.iter()) {
            *w &= !o;
        }
        rest
    }

    /// The CPUs a process whose own mask is `own` may run on while its program is allocated
    /// `self`: the allocated CPUs its mask allows, or all of them when it allows none. The one
    /// rule of the manager (which narrows the process's threads) and of the runtime (which
    /// pins its workers), so that the two never undo each other.
    ///
    /// ```
    /// let set = |v: &[usize]| v.iter().copied().collect::<partita_protocol::CpuSet>();
    /// assert_eq!(set(&[0, 1]).narrowed(&set(&[1, 2, 3])), set(&[1]));
    /// assert_eq!(set(&[0]).narrowed(&set(&[1])), set(&[0]));
    /// ```
    pub fn narrowed(&self, own: &CpuSet) -> CpuSet {
        let mut both = *self;
        for (w, o) in both.words.iter_mut().zip(own.words.iter()) {
            *w &= o;
        }
        if both.is_empty() {
            *self
        } else {
            both
        }
    }

    /// Number of CPUs in the set.
    ///
    /// ```
    /// let s: partita_protocol::CpuSet = [0, 900].into_iter().collect();
    /// assert_eq!(s.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    ///
    /// ```
    /// assert!(partita_protocol::CpuSet::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The CPUs in increasing order.
    ///
    /// ```
    /// let s: partita_protocol::CpuSet = [3, 1].into_iter().collect();
    /// assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 3]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(i * 64 + b)
            })
        })
    }

    /// The CPUs in increasing order, collected.
    ///
    /// ```
    /// let s: partita_protocol::CpuSet = [3, 1].into_iter().collect();
    /// assert_eq!(s.to_vec(), vec![1, 3]);
    /// ```
    pub fn to_vec(&self) -> Vec<usize> {
        self.iter().collect()
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        let mut s = CpuSet::new();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

impl fmt::Display for CpuSet {
    /// Linux list format (`0-3,8,10-11`); the empty set prints as nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus = self.to_vec();
        let mut i = 0;
        let mut first = true;
        while i < cpus.len() {
            let start = cpus[i];
            let mut end = start;
            while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
                i += 1;
                end = cpus[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet[{self}]")
    }
}

/// Error parsing a CPU list such as `0-3,8`.
///
/// ```
/// assert!("7-3".parse::<partita_protocol::CpuSet>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU list {input:?}: {reason}")]
pub struct CpuListError {
    /// The text that failed to parse.
    pub input: String,
    /// Why.
    pub reason: &'static str,
}

impl std::str::FromStr for CpuSet {
    type Err = CpuListError;

    /// Parse the Linux list format (`/sys/.../cpuset.cpus`, `Cpus_allowed_list`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| CpuListError {
            input: s.to_string(),
            reason,
        };
        let mut set = CpuSet::new();
        let s = s.trim();
        if s.is_empty() {
            return Ok(set);
        }
        for part in s.split(',') {
            let part = part.trim();
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            let a: usize = a.trim().parse().map_err(|_| err("not a number"))?;
            let b: usize = b.trim().parse().map_err(|_| err("not a number"))?;
            if a > b {
                return Err(err("range start above its end"));
            }
            if b >= MAX_CPUS {
                return Err(err("CPU number above 1023"));
            }
            for c in a..=b {
                set.insert(c);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn display_parse_round_trip(cpus in proptest::collection::btree_set(0usize..MAX_CPUS, 0..64)) {
            let set: CpuSet = cpus.iter().copied().collect();
            let text = set.to_string();
            prop_assert_eq!(text.parse::<CpuSet>().unwrap(), set);
            prop_assert_eq!(set.len(), cpus.len());
        }
    }

    #[test]
    fn parse_errors() {
        assert!("3-1".parse::<CpuSet>().is_err());
        assert!("x".parse::<CpuSet>().is_err());
        assert!("1024".parse::<CpuSet>().is_err());
        assert_eq!("0-1\n".parse::<CpuSet>().unwrap().len(), 2);
        assert!("0-1,".parse::<CpuSet>().is_err());
    }
}

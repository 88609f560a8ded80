//! Counters kept by each producer and consumer, and the paper's load-distribution metric.

/// What one consumer did. Kept in its [`ConsumerState`](crate::ConsumerState), so counting
/// costs no shared-memory traffic.
///
/// ```
/// use partita_queues::{Config, ReadyQueues};
/// let q: ReadyQueues<u8> = Config::new(2).build().unwrap();
/// let mut c = q.consumer(0);
/// assert!(q.poll(&mut c).is_none());
/// assert_eq!(c.stats().empty_polls, 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    /// Tasks claimed.
    pub served: u64,
    /// Tasks claimed from the consumer's primary queue.
    pub primary_claims: u64,
    /// Tasks claimed from a queue the policy sent it to (not primary, not extra).
    pub secondary_claims: u64,
    /// Tasks claimed from a suspended worker's queue given to this consumer.
    pub extra_claims: u64,
    /// Of `served`, tasks that came from a queue's overflow list.
    pub overflow_claims: u64,
    /// Ready bits found cleared by another consumer before this one could claim them.
    pub lost_races: u64,
    /// Polls that returned nothing.
    pub empty_polls: u64,
}

impl ConsumerStats {
    /// Adds `other` into `self` (for totals over consumers).
    ///
    /// ```
    /// let mut a = partita_queues::ConsumerStats { served: 1, ..Default::default() };
    /// a.merge(&a.clone());
    /// assert_eq!(a.served, 2);
    /// ```
    pub fn merge(&mut self, other: &ConsumerStats) {
        self.served += other.served;
        self.primary_claims += other.primary_claims;
        self.secondary_claims += other.secondary_claims;
        self.extra_claims += other.extra_claims;
        self.overflow_claims += other.overflow_claims;
        self.lost_races += other.lost_races;
        self.empty_polls += other.empty_polls;
    }
}

/// What one producer did.
///
/// ```
/// use partita_queues::{Config, ReadyQueues};
/// let q: ReadyQueues<u8> = Config::new(2).build().unwrap();
/// let mut p = q.producer(0);
/// q.post(&mut p, 1);
/// assert_eq!(p.stats().posts, 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Tasks posted.
    pub posts: u64,
    /// Posts whose policy choice was the producer's primary queue.
    pub primary_posts: u64,
    /// Posts whose policy choice was a secondary queue (Primary/* over the cutoff, or
    /// Random/Sequential landing elsewhere).
    pub secondary_posts: u64,
    /// Posts that found the chosen queue full and landed in another queue (ring order).
    pub full_fallbacks: u64,
    /// Posts that found every queue full and went to the unbounded overflow list.
    pub overflow_posts: u64,
}

impl ProducerStats {
    /// Adds `other` into `self`.
    ///
    /// ```
    /// let mut a = partita_queues::ProducerStats { posts: 2, ..Default::default() };
    /// a.merge(&a.clone());
    /// assert_eq!(a.posts, 4);
    /// ```
    pub fn merge(&mut self, other: &ProducerStats) {
        self.posts += other.posts;
        self.primary_posts += other.primary_posts;
        self.secondary_posts += other.secondary_posts;
        self.full_fallbacks += other.full_fallbacks;
        self.overflow_posts += other.overflow_posts;
    }
}

/// The paper's load-distribution metric: for each consumer, its share of all tasks served in
/// percent minus the even share `100 / n` (percentage points off balanced; 0 is ideal, the
/// entries sum to 0). All zeros when nothing was served.
///
/// ```
/// // The paper's Static:Static result: 40 / 30 / 30 of the tasks.
/// let off = partita_queues::load_split(&[40, 30, 30]);
/// assert!((off[0] - 6.67).abs() < 0.01 && (off[1] + 3.33).abs() < 0.01);
/// ```
pub fn load_split(served: &[u64]) -> Vec<f64> {
    let total: u64 = served.iter().sum();
    if total == 0 || served.is_empty() {
        return vec![0.0; served.len()];
    }
    let even = 100.0 / served.len() as f64;
    served
        .iter()
        .map(|&s| 100.0 * s as f64 / total as f64 - even)
        .collect()
}

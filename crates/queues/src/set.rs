//! The ready-queue set: N queues plus the policies, with per-thread state kept outside.

use crate::config::{Config, SecondaryCursor};
use crate::error::{ConfigError, Full};
use crate::policy::{
    dequeue_search, enqueue_choice, DequeueCursor, DequeuePolicy, EnqueueCursor, LockMode, Role,
    Structure,
};
use crate::queue::{Direction, FifoQueue, MultiAccessQueue, PaperQueue, ReadyQueue, Scan};
use crate::rng::XorShift64;
use crate::stats::{ConsumerStats, ProducerStats};

/// One queue of the set, dispatched statically (no `dyn` on the hot path).
/// The atomic variant is large because its bitmaps sit on their own cache lines; that padding
/// is the point (no false sharing between adjacent queues), so boxing it would only add an
/// indirection to every operation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum AnyQueue<T> {
    Atomic(MultiAccessQueue<T>),
    Paper(PaperQueue<T>),
    Fifo(FifoQueue<T>),
}

impl<T: Send> AnyQueue<T> {
    #[inline]
    fn try_post(&self, task: T) -> Result<usize, Full<T>> {
        match self {
            AnyQueue::Atomic(q) => q.try_post(task),
            AnyQueue::Paper(q) => q.try_post(task),
            AnyQueue::Fifo(q) => q.try_post(task),
        }
    }

    #[inline]
    fn claim(&self, scan: Scan) -> crate::queue::Claim<T> {
        match self {
            AnyQueue::Atomic(q) => q.claim(scan),
            AnyQueue::Paper(q) => q.claim(scan),
            AnyQueue::Fifo(q) => q.claim(scan),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        match self {
            AnyQueue::Atomic(q) => q.len(),
            AnyQueue::Paper(q) => q.len(),
            AnyQueue::Fifo(q) => q.len(),
        }
    }
}

/// A set of ready queues with an enqueue and a dequeue policy: the structure of DiBella et
/// al., usable from any number of threads (`Sync` for `T: Send`).
///
/// Per-thread state (cursors, random generators, Sequential's ring index, statistics) lives in
/// [`ProducerState`] and [`ConsumerState`] objects that each thread owns and passes by
/// `&mut`, so the set itself has no per-thread storage. Neither [`post`](Self::post) nor
/// [`poll`](Self::poll) ever blocks waiting for another thread or spins: an empty poll
/// returns `None` and the caller decides how to idle.
///
/// ```
/// use partita_queues::{Config, DequeuePolicy, EnqueuePolicy, ReadyQueues};
/// use std::sync::Arc;
///
/// let queues: Arc<ReadyQueues<u64>> = Arc::new(
///     Config::new(2)
///         .dequeue(DequeuePolicy::Sequential)
///         .enqueue(EnqueuePolicy::PrimaryRandom)
///         .build()
///         .unwrap(),
/// );
/// let producer = {
///     let q = Arc::clone(&queues);
///     std::thread::spawn(move || {
///         let mut me = q.producer(0);
///         for t in 0..1000 { q.post(&mut me, t); }
///     })
/// };
/// producer.join().unwrap();
/// let (mut c0, mut c1) = (queues.consumer(0), queues.consumer(1));
/// let mut sum = 0;
/// while let Some(t) = queues.poll(&mut c0).or_else(|| queues.poll(&mut c1)) { sum += t; }
/// assert_eq!(sum, 999 * 1000 / 2);
/// assert!(queues.is_empty());
/// ```
#[derive(Debug)]
pub struct ReadyQueues<T> {
    config: Config,
    structure: Structure,
    queues: Box<[AnyQueue<T>]>,
    /// Per queue: where posts go when every queue is full (multi-access only).
    overflow: Box<[FifoQueue<T>]>,
    slots: usize,
    cutoff: usize,
}

impl<T: Send> ReadyQueues<T> {
    pub(crate) fn from_validated(config: Config, structure: Structure) -> Self {
        let n = match structure {
            Structure::GlobalFifo => 1,
            _ => config.num_queues(),
        };
        let slots = config.slot_count();
        let queues = (0..n)
            .map(|_| match structure {
                Structure::MultiAccess(LockMode::Atomic) => {
                    AnyQueue::Atomic(MultiAccessQueue::new(slots))
                }
                Structure::MultiAccess(LockMode::Paper) => AnyQueue::Paper(PaperQueue::new(slots)),
                Structure::GlobalFifo | Structure::DistributedFifo => {
                    AnyQueue::Fifo(FifoQueue::new())
                }
            })
            .collect();
        let overflow_queues = match structure {
            Structure::MultiAccess(_) => n,
            _ => 0,
        };
        Self {
            cutoff: config.cutoff_value(),
            config,
            structure,
            queues,
            overflow: (0..overflow_queues).map(|_| FifoQueue::new()).collect(),
            slots,
        }
    }

    /// The validated configuration.
    ///
    /// ```
    /// let q = partita_queues::Config::new(3).build::<u8>().unwrap();
    /// assert_eq!(q.config().num_queues(), 3);
    /// ```
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The queue structure the policy pair runs on.
    ///
    /// ```
    /// use partita_queues::{Config, LockMode, Structure};
    /// let q = Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.structure(), Structure::MultiAccess(LockMode::Atomic));
    /// ```
    pub fn structure(&self) -> Structure {
        self.structure
    }

    /// Number of queues in the set (1 for Global).
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::global_fifo(4).build::<u8>().unwrap().num_queues(), 1);
    /// ```
    pub fn num_queues(&self) -> usize {
        self.queues.len()
    }

    /// The state object for producer `id` (its primary queue is `id mod N`; its generator is
    /// derived from the configured seed and `id`).
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.producer(3).id(), 3);
    /// ```
    pub fn producer(&self, id: usize) -> ProducerState {
        ProducerState {
            cursor: EnqueueCursor::new(
                id,
                XorShift64::for_stream(self.config.seed_value(), 2 * id),
            ),
            stats: ProducerStats::default(),
        }
    }

    /// The state object for consumer `id` (its primary queue is `id mod N`).
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.consumer(3).home(), 1);
    /// ```
    pub fn consumer(&self, id: usize) -> ConsumerState {
        let n = self.num_queues();
        let home = id % n;
        let cursors = match self.config.secondary_cursor_mode() {
            SecondaryCursor::Shared => 1,
            SecondaryCursor::PerQueue => n,
        };
        ConsumerState {
            id,
            cursor: DequeueCursor::new(
                home,
                n,
                XorShift64::for_stream(self.config.seed_value(), 2 * id + 1),
            ),
            // The first forward scan starts at slot 0, the first backward scan at the last
            // slot.
            primary_last: self.slots - 1,
            secondary_last: vec![0; cursors],
            extra: Vec::new(),
            stats: ConsumerStats::default(),
        }
    }

    /// Posts `task` as the producer's enqueue policy says. Never fails and never blocks: if
    /// the chosen queue is full the task goes to the next queue in ring order with a free slot,
    /// and if every queue is full to the chosen queue's unbounded overflow list (counted in
    /// [`ProducerStats::full_fallbacks`] and [`ProducerStats::overflow_posts`]).
    ///
    /// ```
    /// use partita_queues::{Config, EnqueuePolicy, DequeuePolicy};
    /// let q = Config::new(2).slots(1).enqueue(EnqueuePolicy::Static)
    ///     .dequeue(DequeuePolicy::Static).build::<u8>().unwrap();
    /// let mut p = q.producer(0);
    /// for t in 0..3 { q.post(&mut p, t); }
    /// assert_eq!((p.stats().full_fallbacks, p.stats().overflow_posts), (1, 1));
    /// assert_eq!(q.len(), 3);
    /// ```
    pub fn post(&self, producer: &mut ProducerState, task: T) {
        let n = self.queues.len();
        let (q, role) = enqueue_choice(
            self.config.enqueue_policy(),
            &mut producer.cursor,
            n,
            self.cutoff,
            |q| self.queues[q].len(),
        );
        let stats = &mut producer.stats;
        stats.posts += 1;
        match role {
            Role::Primary => stats.primary_posts += 1,
            _ => stats.secondary_posts += 1,
        }
        let mut task = match self.queues[q].try_post(task) {
            Ok(_) => return,
            Err(Full(task)) => task,
        };
        for i in 1..n {
            match self.queues[(q + i) % n].try_post(task) {
                Ok(_) => {
                    stats.full_fallbacks += 1;
                    return;
                }
                Err(Full(back)) => task = back,
            }
        }
        stats.overflow_posts += 1;
        // Only multi-access queues can be full, and they all have an overflow list.
        self.overflow[q].push(task);
    }

    /// Posts `task` into queue `q` directly, bypassing the policy; hands it back if that
    /// queue is full (or `q` is out of range).
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).slots(1).build::<u8>().unwrap();
    /// assert!(q.try_post_to(1, 7).is_ok());
    /// assert_eq!(q.try_post_to(1, 8).unwrap_err().0, 8);
    /// assert_eq!(q.queue_len(1), 1);
    /// ```
    pub fn try_post_to(&self, q: usize, task: T) -> Result<usize, Full<T>> {
        match self.queues.get(q) {
            Some(queue) => queue.try_post(task),
            None => Err(Full(task)),
        }
    }

    /// One dequeue decision of the consumer's policy (searching also the extra queues set with
    /// [`ConsumerState::set_extra`]). Returns `None` when every queue the policy allows at this
    /// decision was seen empty; never blocks.
    ///
    /// ```
    /// use partita_queues::{Config, DequeuePolicy, EnqueuePolicy};
    /// let q = Config::new(2).dequeue(DequeuePolicy::Static).enqueue(EnqueuePolicy::Static)
    ///     .build::<&str>().unwrap();
    /// q.post(&mut q.producer(1), "for queue 1");
    /// let (mut c0, mut c1) = (q.consumer(0), q.consumer(1));
    /// assert_eq!(q.poll(&mut c0), None); // Static: consumer 0 never looks at queue 1
    /// assert_eq!(q.poll(&mut c1), Some("for queue 1"));
    /// ```
    pub fn poll(&self, consumer: &mut ConsumerState) -> Option<T> {
        let extra = std::mem::take(&mut consumer.extra);
        let task = self.poll_with_extra(consumer, &extra);
        consumer.extra = extra;
        task
    }

    /// As [`poll`](Self::poll), but with `extra` as the extra queues for this decision
    /// (instead of those stored in the consumer state): the queues of suspended workers that
    /// this active consumer must also serve. They are searched right after the primary.
    ///
    /// ```
    /// use partita_queues::{Config, DequeuePolicy, EnqueuePolicy, Role};
    /// let q = Config::new(3).dequeue(DequeuePolicy::PrimaryFixed)
    ///     .enqueue(EnqueuePolicy::Static).build::<u8>().unwrap();
    /// q.post(&mut q.producer(2), 9); // queue 2; consumer 2 is suspended
    /// let mut c0 = q.consumer(0);    // Primary/Fixed: 0 looks only at 0 and 1 ...
    /// assert_eq!(q.poll(&mut c0), None);
    /// assert_eq!(q.poll_with_extra(&mut c0, &[2]), Some(9)); // ... unless given queue 2
    /// assert_eq!(c0.stats().extra_claims, 1);
    /// ```
    pub fn poll_with_extra(&self, consumer: &mut ConsumerState, extra: &[usize]) -> Option<T> {
        let mut got = None;
        let slots = self.slots;
        let bidirectional = self.config.is_bidirectional();
        let per_queue = consumer.secondary_last.len() > 1;
        let ConsumerState {
            cursor,
            primary_last,
            secondary_last,
            stats,
            ..
        } = consumer;
        let found = dequeue_search(
            self.config.dequeue_policy(),
            cursor,
            self.queues.len(),
            extra,
            |q, role| {
                if let Some(overflow) = self.overflow.get(q) {
                    if let Some(task) = overflow.pop() {
                        stats.overflow_claims += 1;
                        got = Some(task);
                        return true;
                    }
                }
                let ci = if per_queue { q } else { 0 };
                let scan = match role {
                    Role::Primary => Scan::after_cursor(*primary_last, slots, Direction::Forward),
                    _ if bidirectional => {
                        Scan::after_cursor(secondary_last[ci], slots, Direction::Backward)
                    }
                    _ => Scan::after_cursor(secondary_last[ci], slots, Direction::Forward),
                };
                let claim = self.queues[q].claim(scan);
                stats.lost_races += u64::from(claim.lost_races);
                match claim.taken {
                    Some((slot, task)) => {
                        match role {
                            Role::Primary => *primary_last = slot,
                            _ => secondary_last[ci] = slot,
                        }
                        got = Some(task);
                        true
                    }
                    None => false,
                }
            },
        );
        match found {
            Some((_, role)) => {
                stats.served += 1;
                match role {
                    Role::Primary => stats.primary_claims += 1,
                    Role::Secondary => stats.secondary_claims += 1,
                    Role::Extra => stats.extra_claims += 1,
                }
            }
            None => stats.empty_polls += 1,
        }
        got
    }

    /// Number of ready tasks in queue `q`, including its overflow list (0 if out of range).
    /// A lock-free hint.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// q.try_post_to(0, 1).unwrap();
    /// assert_eq!((q.queue_len(0), q.queue_len(1), q.queue_len(9)), (1, 0, 0));
    /// ```
    pub fn queue_len(&self, q: usize) -> usize {
        self.queues.get(q).map_or(0, |queue| queue.len())
            + self.overflow.get(q).map_or(0, |o| o.count())
    }

    /// Total number of ready tasks in all queues and overflow lists: a lock-free hint, exact
    /// at quiescence.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// q.post(&mut q.producer(0), 1);
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        (0..self.queues.len()).map(|q| self.queue_len(q)).sum()
    }

    /// Whether [`len`](Self::len) is 0.
    ///
    /// ```
    /// assert!(partita_queues::Config::new(2).build::<u8>().unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        (0..self.queues.len()).all(|q| self.queue_len(q) == 0)
    }

    /// Process control: checks that consumers may be active/suspended as `active` says
    /// (`active[c]` for consumer `c`) and returns, per consumer, the extra queues it must
    /// serve so that no queue is left without an active consumer.
    ///
    /// A queue needs an extra consumer when no active consumer has it as primary; such
    /// queues are dealt round-robin to the active consumers. Fails if the dequeue policy is
    /// Static and anyone is suspended (Static is legal only while every worker is active), if
    /// nobody is active, or if `active` has the wrong length.
    ///
    /// ```
    /// use partita_queues::{Config, ConfigError, DequeuePolicy};
    /// let q = Config::new(3).build::<u8>().unwrap(); // Sequential
    /// let extras = q.extra_queues(&[true, false, true]).unwrap();
    /// assert_eq!(extras, vec![vec![1], vec![], vec![]]);
    ///
    /// let s = Config::new(2).dequeue(DequeuePolicy::Static)
    ///     .enqueue(partita_queues::EnqueuePolicy::Static).build::<u8>().unwrap();
    /// assert_eq!(s.extra_queues(&[true, false]),
    ///            Err(ConfigError::StaticWithSuspendedWorker { suspended: 1 }));
    /// ```
    pub fn extra_queues(&self, active: &[bool]) -> Result<Vec<Vec<usize>>, ConfigError> {
        let consumers = self.config.num_consumers();
        if active.len() != consumers {
            return Err(ConfigError::ActivityLength {
                got: active.len(),
                consumers,
            });
        }
        let n = self.queues.len();
        let active_ids: Vec<usize> = (0..consumers).filter(|&c| active[c]).collect();
        if active_ids.is_empty() {
            return Err(ConfigError::NoActiveConsumer { consumers });
        }
        if self.config.dequeue_policy() == DequeuePolicy::Static {
            if let Some(suspended) = active.iter().position(|a| !a) {
                return Err(ConfigError::StaticWithSuspendedWorker { suspended });
            }
        }
        let mut covered = vec![false; n];
        for &c in &active_ids {
            covered[c % n] = true;
        }
        let mut extras = vec![Vec::new(); consumers];
        let orphans = (0..n).filter(|&q| !covered[q]);
        for (k, q) in orphans.enumerate() {
            extras[active_ids[k % active_ids.len()]].push(q);
        }
        Ok(extras)
    }
}

/// A producer's private state: its id, Sequential's post counter, its random generator and
/// its statistics. Create with [`ReadyQueues::producer`]; owned by one thread.
///
/// ```
/// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
/// let mut p = q.producer(0);
/// q.post(&mut p, 1);
/// assert_eq!(p.stats().posts, 1);
/// ```
#[derive(Clone, Debug)]
pub struct ProducerState {
    cursor: EnqueueCursor,
    stats: ProducerStats,
}

impl ProducerState {
    /// The producer id.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.producer(5).id(), 5);
    /// ```
    pub fn id(&self) -> usize {
        self.cursor.id
    }

    /// The policy cursor (post count, generator).
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.producer(0).cursor().posts, 0);
    /// ```
    pub fn cursor(&self) -> &EnqueueCursor {
        &self.cursor
    }

    /// Counters so far.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.producer(0).stats().posts, 0);
    /// ```
    pub fn stats(&self) -> &ProducerStats {
        &self.stats
    }

    /// Returns the counters and resets them to zero.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// let mut p = q.producer(0);
    /// q.post(&mut p, 1);
    /// assert_eq!(p.take_stats().posts, 1);
    /// assert_eq!(p.stats().posts, 0);
    /// ```
    pub fn take_stats(&mut self) -> ProducerStats {
        std::mem::take(&mut self.stats)
    }
}

/// A consumer's private state: its policy cursor (home queue, Sequential's ring index,
/// generator), the last slot it served in its primary and secondary queues, the extra queues
/// it serves for suspended workers, and its statistics. Create with
/// [`ReadyQueues::consumer`]; owned by one thread.
///
/// ```
/// let q = partita_queues::Config::new(4).build::<u8>().unwrap();
/// let mut c = q.consumer(2);
/// c.set_extra(vec![3]);
/// assert_eq!((c.home(), c.extra()), (2, &[3][..]));
/// ```
#[derive(Clone, Debug)]
pub struct ConsumerState {
    id: usize,
    cursor: DequeueCursor,
    primary_last: usize,
    secondary_last: Vec<usize>,
    extra: Vec<usize>,
    stats: ConsumerStats,
}

impl ConsumerState {
    /// The consumer id.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.consumer(1).id(), 1);
    /// ```
    pub fn id(&self) -> usize {
        self.id
    }

    /// The primary queue.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.consumer(3).home(), 1);
    /// ```
    pub fn home(&self) -> usize {
        self.cursor.home
    }

    /// The policy cursor (home, ring index, generator).
    ///
    /// ```
    /// let q = partita_queues::Config::new(3).build::<u8>().unwrap();
    /// assert_eq!(q.consumer(0).cursor().ring, 1);
    /// ```
    pub fn cursor(&self) -> &DequeueCursor {
        &self.cursor
    }

    /// The last slot served in the primary queue (the next primary scan starts one after).
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).slots(8).build::<u8>().unwrap();
    /// assert_eq!(q.consumer(0).primary_cursor(), 7);
    /// ```
    pub fn primary_cursor(&self) -> usize {
        self.primary_last
    }

    /// Sets the extra queues (of suspended workers) this consumer also serves on every
    /// [`ReadyQueues::poll`]; see [`ReadyQueues::extra_queues`].
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// let mut c = q.consumer(0);
    /// c.set_extra(vec![1]);
    /// q.try_post_to(1, 4).unwrap();
    /// assert_eq!(q.poll(&mut c), Some(4));
    /// ```
    pub fn set_extra(&mut self, queues: Vec<usize>) {
        self.extra = queues;
    }

    /// The extra queues currently served.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert!(q.consumer(0).extra().is_empty());
    /// ```
    pub fn extra(&self) -> &[usize] {
        &self.extra
    }

    /// Counters so far.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// assert_eq!(q.consumer(0).stats().served, 0);
    /// ```
    pub fn stats(&self) -> &ConsumerStats {
        &self.stats
    }

    /// Returns the counters and resets them to zero.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<u8>().unwrap();
    /// let mut c = q.consumer(0);
    /// q.poll(&mut c);
    /// assert_eq!(c.take_stats().empty_polls, 1);
    /// assert_eq!(c.stats().empty_polls, 0);
    /// ```
    pub fn take_stats(&mut self) -> ConsumerStats {
        std::mem::take(&mut self.stats)
    }
}

//! Building a ready-queue set: every knob from the paper, validated at construction.

use crate::error::ConfigError;
use crate::policy::{structure_for, DequeuePolicy, EnqueuePolicy, LockMode, Structure};
use crate::queue::MAX_SLOTS;
use crate::set::ReadyQueues;

/// Whether consumers share one cursor for all their secondary queues (the paper) or keep one
/// per queue.
///
/// ```
/// assert_eq!(partita_queues::SecondaryCursor::default(), partita_queues::SecondaryCursor::Shared);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SecondaryCursor {
    /// One remembered slot for whatever secondary queue the consumer visits (the paper).
    #[default]
    Shared,
    /// One remembered slot per queue.
    PerQueue,
}

/// The configuration of a [`ReadyQueues`] set; a builder whose [`build`](Config::build)
/// checks every construction rule.
///
/// Defaults: as many consumers as queues, the paper's best pair Sequential : Primary/Random,
/// `LockMode::Atomic`, 64 slots, cutoff = half the slots, bidirectional search on, shared
/// secondary cursor, seed 0x5EED.
///
/// ```
/// use partita_queues::{Config, DequeuePolicy, EnqueuePolicy, LockMode, ReadyQueues};
/// let q: ReadyQueues<u64> = Config::new(4)
///     .dequeue(DequeuePolicy::PrimarySequential)
///     .enqueue(EnqueuePolicy::PrimaryFixed)
///     .lock_mode(LockMode::Paper)
///     .slots(32)
///     .cutoff(8)
///     .seed(42)
///     .build()
///     .unwrap();
/// assert_eq!(q.num_queues(), 4);
/// assert_eq!(q.config().cutoff_value(), 8);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    queues: usize,
    consumers: Option<usize>,
    dequeue: DequeuePolicy,
    enqueue: EnqueuePolicy,
    lock_mode: LockMode,
    slots: usize,
    cutoff: Option<usize>,
    seed: u64,
    bidirectional: bool,
    secondary_cursor: SecondaryCursor,
}

impl Config {
    /// A configuration for `queues` queues (normally one per worker) with the defaults.
    ///
    /// ```
    /// let c = partita_queues::Config::new(3);
    /// assert_eq!((c.num_queues(), c.num_consumers(), c.slot_count(), c.cutoff_value()), (3, 3, 64, 32));
    /// ```
    pub fn new(queues: usize) -> Self {
        Self {
            queues,
            consumers: None,
            dequeue: DequeuePolicy::Sequential,
            enqueue: EnqueuePolicy::PrimaryRandom,
            lock_mode: LockMode::Atomic,
            slots: MAX_SLOTS,
            cutoff: None,
            seed: 0x5EED,
            bidirectional: true,
            secondary_cursor: SecondaryCursor::Shared,
        }
    }

    /// The Global : Global baseline (one lock-protected FIFO) for `consumers` consumers.
    ///
    /// ```
    /// let q = partita_queues::Config::global_fifo(3).build::<u8>().unwrap();
    /// assert_eq!(q.num_queues(), 1);
    /// ```
    pub fn global_fifo(consumers: usize) -> Self {
        Self::new(1)
            .consumers(consumers)
            .dequeue(DequeuePolicy::Global)
            .enqueue(EnqueuePolicy::Global)
    }

    /// The Distributed FCFS baseline over `queues` FIFOs with the given producer policy
    /// (`StaticFcfs` or `RandomFcfs`).
    ///
    /// ```
    /// use partita_queues::{Config, EnqueuePolicy};
    /// let q = Config::distributed_fifo(2, EnqueuePolicy::RandomFcfs).build::<u8>().unwrap();
    /// assert_eq!(q.num_queues(), 2);
    /// ```
    pub fn distributed_fifo(queues: usize, enqueue: EnqueuePolicy) -> Self {
        Self::new(queues)
            .dequeue(DequeuePolicy::DistributedFcfs)
            .enqueue(enqueue)
    }

    /// Sets the number of consumers (default: one per queue). Consumer `c`'s primary queue is
    /// `c mod queues`.
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(2).consumers(5).num_consumers(), 5);
    /// ```
    pub fn consumers(mut self, consumers: usize) -> Self {
        self.consumers = Some(consumers);
        self
    }

    /// Sets the dequeue (consumer) policy.
    ///
    /// ```
    /// use partita_queues::{Config, DequeuePolicy};
    /// assert_eq!(Config::new(2).dequeue(DequeuePolicy::Random).dequeue_policy(), DequeuePolicy::Random);
    /// ```
    pub fn dequeue(mut self, policy: DequeuePolicy) -> Self {
        self.dequeue = policy;
        self
    }

    /// Sets the enqueue (producer) policy.
    ///
    /// ```
    /// use partita_queues::{Config, EnqueuePolicy};
    /// assert_eq!(Config::new(2).enqueue(EnqueuePolicy::Static).enqueue_policy(), EnqueuePolicy::Static);
    /// ```
    pub fn enqueue(mut self, policy: EnqueuePolicy) -> Self {
        self.enqueue = policy;
        self
    }

    /// Sets the lock mode of the multi-access queues (ignored by the FIFO baselines).
    ///
    /// ```
    /// use partita_queues::{Config, LockMode};
    /// assert_eq!(Config::new(2).lock_mode(LockMode::Paper).lock_mode_value(), LockMode::Paper);
    /// ```
    pub fn lock_mode(mut self, mode: LockMode) -> Self {
        self.lock_mode = mode;
        self
    }

    /// Sets the slots per multi-access queue (`1..=64`; the paper used 32).
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(2).slots(32).cutoff_value(), 16);
    /// ```
    pub fn slots(mut self, slots: usize) -> Self {
        self.slots = slots;
        self
    }

    /// Sets the Primary/* producer cutoff: post to the primary while it holds fewer ready
    /// tasks than this (`1..=slots`; default half the slots).
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(2).cutoff(3).cutoff_value(), 3);
    /// ```
    pub fn cutoff(mut self, cutoff: usize) -> Self {
        self.cutoff = Some(cutoff);
        self
    }

    /// Sets the seed from which every producer's and consumer's generator is derived.
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(2).seed(9).seed_value(), 9);
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Turns bidirectional search (primary left→right, secondaries right→left) on or off.
    ///
    /// ```
    /// assert!(!partita_queues::Config::new(2).bidirectional(false).is_bidirectional());
    /// ```
    pub fn bidirectional(mut self, on: bool) -> Self {
        self.bidirectional = on;
        self
    }

    /// Chooses shared or per-queue secondary cursors.
    ///
    /// ```
    /// use partita_queues::{Config, SecondaryCursor};
    /// let c = Config::new(2).secondary_cursor(SecondaryCursor::PerQueue);
    /// assert_eq!(c.secondary_cursor_mode(), SecondaryCursor::PerQueue);
    /// ```
    pub fn secondary_cursor(mut self, mode: SecondaryCursor) -> Self {
        self.secondary_cursor = mode;
        self
    }

    /// Number of queues requested.
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(7).num_queues(), 7);
    /// ```
    pub fn num_queues(&self) -> usize {
        self.queues
    }

    /// Number of consumers (default: number of queues).
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(7).num_consumers(), 7);
    /// ```
    pub fn num_consumers(&self) -> usize {
        self.consumers.unwrap_or(self.queues)
    }

    /// The dequeue policy.
    ///
    /// ```
    /// use partita_queues::{Config, DequeuePolicy};
    /// assert_eq!(Config::new(2).dequeue_policy(), DequeuePolicy::Sequential);
    /// ```
    pub fn dequeue_policy(&self) -> DequeuePolicy {
        self.dequeue
    }

    /// The enqueue policy.
    ///
    /// ```
    /// use partita_queues::{Config, EnqueuePolicy};
    /// assert_eq!(Config::new(2).enqueue_policy(), EnqueuePolicy::PrimaryRandom);
    /// ```
    pub fn enqueue_policy(&self) -> EnqueuePolicy {
        self.enqueue
    }

    /// The lock mode.
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(2).lock_mode_value(), partita_queues::LockMode::Atomic);
    /// ```
    pub fn lock_mode_value(&self) -> LockMode {
        self.lock_mode
    }

    /// Slots per multi-access queue.
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(2).slots(8).slot_count(), 8);
    /// ```
    pub fn slot_count(&self) -> usize {
        self.slots
    }

    /// The Primary/* cutoff (default half the slots, at least 1).
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(2).slots(1).cutoff_value(), 1);
    /// ```
    pub fn cutoff_value(&self) -> usize {
        self.cutoff.unwrap_or((self.slots / 2).max(1))
    }

    /// The run seed.
    ///
    /// ```
    /// assert_eq!(partita_queues::Config::new(2).seed_value(), 0x5EED);
    /// ```
    pub fn seed_value(&self) -> u64 {
        self.seed
    }

    /// Whether bidirectional search is on.
    ///
    /// ```
    /// assert!(partita_queues::Config::new(2).is_bidirectional());
    /// ```
    pub fn is_bidirectional(&self) -> bool {
        self.bidirectional
    }

    /// Shared or per-queue secondary cursors.
    ///
    /// ```
    /// use partita_queues::{Config, SecondaryCursor};
    /// assert_eq!(Config::new(2).secondary_cursor_mode(), SecondaryCursor::Shared);
    /// ```
    pub fn secondary_cursor_mode(&self) -> SecondaryCursor {
        self.secondary_cursor
    }

    /// Checks every construction rule and returns the structure the pair runs on: Table 3,
    /// sizes, N = 1 for policies with a secondary, and the Static coverage rule.
    ///
    /// ```
    /// use partita_queues::{Config, ConfigError, DequeuePolicy};
    /// let err = Config::new(3).consumers(2).dequeue(DequeuePolicy::Static).validate().unwrap_err();
    /// assert_eq!(err, ConfigError::StaticDoesNotCover { queues: 3, consumers: 2 });
    /// let err = Config::new(1).dequeue(DequeuePolicy::PrimaryFixed).validate().unwrap_err();
    /// assert!(err.to_string().contains("N = 1"));
    /// ```
    pub fn validate(&self) -> Result<Structure, ConfigError> {
        let structure = structure_for(self.dequeue, self.enqueue, self.lock_mode)?;
        let range = |key, value: usize, min, max| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(ConfigError::OutOfRange {
                    key,
                    value,
                    min,
                    max,
                })
            }
        };
        range("queues", self.queues, 1, 1 << 16)?;
        range("consumers", self.num_consumers(), 1, 1 << 16)?;
        range("slots", self.slots, 1, MAX_SLOTS)?;
        range("cutoff", self.cutoff_value(), 1, self.slots)?;
        if structure != Structure::GlobalFifo && self.queues == 1 {
            if self.dequeue.needs_secondary() {
                return Err(ConfigError::SecondaryNeedsTwoQueues {
                    policy: self.dequeue.name(),
                });
            }
            if self.enqueue.needs_secondary() {
                return Err(ConfigError::SecondaryNeedsTwoQueues {
                    policy: self.enqueue.name(),
                });
            }
        }
        if self.dequeue == DequeuePolicy::Static && self.num_consumers() < self.queues {
            return Err(ConfigError::StaticDoesNotCover {
                queues: self.queues,
                consumers: self.num_consumers(),
            });
        }
        Ok(structure)
    }

    /// Validates and builds the set.
    ///
    /// ```
    /// let q = partita_queues::Config::new(2).build::<String>().unwrap();
    /// assert!(q.is_empty());
    /// ```
    pub fn build<T: Send>(self) -> Result<ReadyQueues<T>, ConfigError> {
        let structure = self.validate()?;
        Ok(ReadyQueues::from_validated(self, structure))
    }
}

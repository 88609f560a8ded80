//! Errors: configuration rules violated at construction, and a full queue handing a task back.

use crate::policy::{DequeuePolicy, EnqueuePolicy};

/// A configuration that breaks one of the construction rules (DiBella Table 3, the Static
/// coverage rule, the one-queue rule, the size limits, or the process-control rule). The
/// message names the rule and the offending values.
///
/// ```
/// use partita_queues::{Config, ConfigError, DequeuePolicy, EnqueuePolicy};
/// let err = Config::new(2)
///     .dequeue(DequeuePolicy::Global)
///     .enqueue(EnqueuePolicy::Random)
///     .build::<u32>()
///     .unwrap_err();
/// assert!(matches!(err, ConfigError::IncompatiblePolicies { .. }));
/// assert!(err.to_string().contains("Table 3"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The dequeue and enqueue policies do not share a queue structure (Table 3).
    #[error(
        "rule Table 3 (compatibility): dequeue policy {dequeue:?} cannot be combined with \
         enqueue policy {enqueue:?}; {hint}"
    )]
    IncompatiblePolicies {
        /// The consumer policy.
        dequeue: DequeuePolicy,
        /// The producer policy.
        enqueue: EnqueuePolicy,
        /// Which enqueue policies this dequeue policy accepts.
        hint: &'static str,
    },
    /// Static consumers only serve their own queue, so there must be at least one consumer per
    /// queue or some queue would never be served.
    #[error(
        "rule Static coverage: the Static dequeue policy needs a consumer for every queue, \
         but {consumers} consumer(s) cannot cover {queues} queue(s)"
    )]
    StaticDoesNotCover {
        /// Number of queues.
        queues: usize,
        /// Number of consumers.
        consumers: usize,
    },
    /// A policy with a secondary queue needs a second queue to name.
    #[error("rule N = 1: policy {policy} needs a secondary queue, but there is only one queue")]
    SecondaryNeedsTwoQueues {
        /// The policy's name.
        policy: &'static str,
    },
    /// A size parameter is outside its range.
    #[error("rule {key}: {value} is out of range {min}..={max}")]
    OutOfRange {
        /// The configuration key (`queues`, `consumers`, `slots`, `cutoff`).
        key: &'static str,
        /// The rejected value.
        value: usize,
        /// Smallest accepted value.
        min: usize,
        /// Largest accepted value.
        max: usize,
    },
    /// Static consumers never look at another queue, so with a suspended worker its queue
    /// would be stranded (process control).
    #[error(
        "rule Static needs every worker active: consumer {suspended} is suspended and nobody \
         else may serve its queue under the Static dequeue policy"
    )]
    StaticWithSuspendedWorker {
        /// The first suspended consumer found.
        suspended: usize,
    },
    /// With every consumer suspended nobody can serve any queue (design decision 2: never below
    /// one active worker).
    #[error("rule never below one: all {consumers} consumer(s) are suspended")]
    NoActiveConsumer {
        /// Number of consumers.
        consumers: usize,
    },
    /// The activity vector does not have one entry per consumer.
    #[error("rule one flag per consumer: got {got} activity flags for {consumers} consumer(s)")]
    ActivityLength {
        /// Flags given.
        got: usize,
        /// Consumers configured.
        consumers: usize,
    },
}

/// The task handed back by a `try_post` on a queue whose slots are all occupied.
///
/// ```
/// use partita_queues::{Full, MultiAccessQueue, ReadyQueue};
/// let q = MultiAccessQueue::new(1);
/// q.try_post(1u8).unwrap();
/// assert_eq!(q.try_post(2u8), Err(Full(2)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full<T>(pub T);

impl<T> std::fmt::Display for Full<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("every slot of the queue is occupied")
    }
}

impl<T: std::fmt::Debug> std::error::Error for Full<T> {}

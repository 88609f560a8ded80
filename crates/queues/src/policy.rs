//! The enqueue and dequeue policies of DiBella et al. (Tables 1–3) as pure functions.
//!
//! A policy decision is separated from the queues it acts on: [`enqueue_choice`] picks the
//! queue for one post given a length oracle, and [`dequeue_search`] runs one dequeue decision
//! given a "try to claim from queue q" callback. [`ReadyQueues`](crate::ReadyQueues) plugs the
//! real queues in; the property tests plug in a deterministic model instead, so every rule is
//! tested without threads.

use crate::error::ConfigError;
use crate::rng::XorShift64;

/// A consumer (the paper's *scheduler*) policy: which queues a consumer searches, in what
/// order (Table 1).
///
/// ```
/// use partita_queues::DequeuePolicy;
/// assert_eq!(DequeuePolicy::ALL.len(), 8);
/// assert!(DequeuePolicy::Sequential.is_multi_access());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DequeuePolicy {
    /// Serve only my own queue; never look elsewhere.
    Static,
    /// Every poll picks a queue uniformly at random; no primary.
    Random,
    /// Own queue first after every task; when empty, continue at a persistent ring index and
    /// stay on a queue while it yields tasks.
    Sequential,
    /// Own queue; when empty, one fixed secondary, `(p + 1) mod N`.
    PrimaryFixed,
    /// Own queue; when empty, one uniformly random other queue, redrawn each time.
    PrimaryRandom,
    /// Own queue; when empty, search `p+1, p+2, …` from scratch and serve the first non-empty
    /// queue once.
    PrimarySequential,
    /// The single global FIFO (baseline).
    Global,
    /// Own FIFO, then a sequential search of the others (baseline, Anderson et al.).
    DistributedFcfs,
}

impl DequeuePolicy {
    /// Every dequeue policy, in the paper's order.
    ///
    /// ```
    /// assert_eq!(partita_queues::DequeuePolicy::ALL[0], partita_queues::DequeuePolicy::Static);
    /// ```
    pub const ALL: [DequeuePolicy; 8] = [
        DequeuePolicy::Static,
        DequeuePolicy::Random,
        DequeuePolicy::Sequential,
        DequeuePolicy::PrimaryFixed,
        DequeuePolicy::PrimaryRandom,
        DequeuePolicy::PrimarySequential,
        DequeuePolicy::Global,
        DequeuePolicy::DistributedFcfs,
    ];

    /// The six policies over multi-access queues (the first block of Table 3).
    ///
    /// ```
    /// assert_eq!(partita_queues::DequeuePolicy::MULTI_ACCESS.len(), 6);
    /// ```
    pub const MULTI_ACCESS: [DequeuePolicy; 6] = [
        DequeuePolicy::Static,
        DequeuePolicy::Random,
        DequeuePolicy::Sequential,
        DequeuePolicy::PrimaryFixed,
        DequeuePolicy::PrimaryRandom,
        DequeuePolicy::PrimarySequential,
    ];

    /// The paper's name, as printed in tables.
    ///
    /// ```
    /// assert_eq!(partita_queues::DequeuePolicy::PrimaryFixed.name(), "Primary/Fixed");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DequeuePolicy::Static => "Static",
            DequeuePolicy::Random => "Random",
            DequeuePolicy::Sequential => "Sequential",
            DequeuePolicy::PrimaryFixed => "Primary/Fixed",
            DequeuePolicy::PrimaryRandom => "Primary/Random",
            DequeuePolicy::PrimarySequential => "Primary/Sequential",
            DequeuePolicy::Global => "Global",
            DequeuePolicy::DistributedFcfs => "Distributed FCFS",
        }
    }

    /// Whether the policy runs over multi-access queues (as opposed to a FIFO baseline).
    ///
    /// ```
    /// assert!(!partita_queues::DequeuePolicy::Global.is_multi_access());
    /// ```
    pub fn is_multi_access(self) -> bool {
        !matches!(self, DequeuePolicy::Global | DequeuePolicy::DistributedFcfs)
    }

    /// Whether the policy needs a queue other than the consumer's own (so N = 1 is illegal).
    ///
    /// ```
    /// assert!(partita_queues::DequeuePolicy::PrimaryFixed.needs_secondary());
    /// assert!(!partita_queues::DequeuePolicy::Static.needs_secondary());
    /// ```
    pub fn needs_secondary(self) -> bool {
        matches!(
            self,
            DequeuePolicy::Sequential
                | DequeuePolicy::PrimaryFixed
                | DequeuePolicy::PrimaryRandom
                | DequeuePolicy::PrimarySequential
        )
    }
}

/// A producer (the paper's *client*) policy: which queue a post goes to (Table 2).
///
/// ```
/// use partita_queues::EnqueuePolicy;
/// assert_eq!(EnqueuePolicy::ALL.len(), 8);
/// assert_eq!(EnqueuePolicy::PrimaryRandom.name(), "Primary/Random");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EnqueuePolicy {
    /// Always queue `id mod N`.
    Static,
    /// A uniformly random queue per task.
    Random,
    /// The k-th post goes to `(id mod N + k) mod N`.
    Sequential,
    /// Primary `id mod N` unless it holds at least `cutoff` ready tasks; then the fixed
    /// secondary `(primary + 1) mod N`.
    PrimaryFixed,
    /// As Primary/Fixed, but the secondary is drawn uniformly from the other queues each time.
    PrimaryRandom,
    /// The global FIFO (baseline).
    Global,
    /// Static choice among the Distributed FCFS queues (baseline).
    StaticFcfs,
    /// Random choice among the Distributed FCFS queues (baseline).
    RandomFcfs,
}

impl EnqueuePolicy {
    /// Every enqueue policy, in the paper's order.
    ///
    /// ```
    /// assert_eq!(partita_queues::EnqueuePolicy::ALL[7], partita_queues::EnqueuePolicy::RandomFcfs);
    /// ```
    pub const ALL: [EnqueuePolicy; 8] = [
        EnqueuePolicy::Static,
        EnqueuePolicy::Random,
        EnqueuePolicy::Sequential,
        EnqueuePolicy::PrimaryFixed,
        EnqueuePolicy::PrimaryRandom,
        EnqueuePolicy::Global,
        EnqueuePolicy::StaticFcfs,
        EnqueuePolicy::RandomFcfs,
    ];

    /// The five policies over multi-access queues.
    ///
    /// ```
    /// assert_eq!(partita_queues::EnqueuePolicy::MULTI_ACCESS.len(), 5);
    /// ```
    pub const MULTI_ACCESS: [EnqueuePolicy; 5] = [
        EnqueuePolicy::Static,
        EnqueuePolicy::Random,
        EnqueuePolicy::Sequential,
        EnqueuePolicy::PrimaryFixed,
        EnqueuePolicy::PrimaryRandom,
    ];

    /// The paper's name, as printed in tables.
    ///
    /// ```
    /// assert_eq!(partita_queues::EnqueuePolicy::StaticFcfs.name(), "Static FCFS");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            EnqueuePolicy::Static => "Static",
            EnqueuePolicy::Random => "Random",
            EnqueuePolicy::Sequential => "Sequential",
            EnqueuePolicy::PrimaryFixed => "Primary/Fixed",
            EnqueuePolicy::PrimaryRandom => "Primary/Random",
            EnqueuePolicy::Global => "Global",
            EnqueuePolicy::StaticFcfs => "Static FCFS",
            EnqueuePolicy::RandomFcfs => "Random FCFS",
        }
    }

    /// Whether the policy needs a queue other than the producer's primary.
    ///
    /// ```
    /// assert!(partita_queues::EnqueuePolicy::PrimaryFixed.needs_secondary());
    /// ```
    pub fn needs_secondary(self) -> bool {
        matches!(
            self,
            EnqueuePolicy::PrimaryFixed | EnqueuePolicy::PrimaryRandom
        )
    }
}

/// The queue structure a policy pair runs on.
///
/// ```
/// use partita_queues::{structure_for, DequeuePolicy, EnqueuePolicy, LockMode, Structure};
/// assert_eq!(
///     structure_for(DequeuePolicy::Global, EnqueuePolicy::Global, LockMode::Atomic),
///     Ok(Structure::GlobalFifo)
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Structure {
    /// N multi-access queues with the given lock mode.
    MultiAccess(LockMode),
    /// One lock-protected FIFO shared by everybody (the paper's Global).
    GlobalFifo,
    /// One lock-protected FIFO per queue (the paper's Distributed FCFS).
    DistributedFifo,
}

/// How a multi-access queue synchronises.
///
/// ```
/// assert_eq!(partita_queues::LockMode::default(), partita_queues::LockMode::Atomic);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// The paper's two-level locking: a bitmap lock plus a lock per slot.
    Paper,
    /// Atomic ready/occupied bitmaps; claim by `fetch_and`, publish by `fetch_or`.
    #[default]
    Atomic,
}

/// Checks a policy pair against Table 3 and returns the structure it runs on.
///
/// Multi-access consumer policies combine with the five multi-access producer policies;
/// Global only with Global; Distributed FCFS only with Static FCFS and Random FCFS.
///
/// ```
/// use partita_queues::{structure_for, DequeuePolicy as D, EnqueuePolicy as E, LockMode};
/// assert!(structure_for(D::Sequential, E::PrimaryRandom, LockMode::Paper).is_ok());
/// assert!(structure_for(D::DistributedFcfs, E::Random, LockMode::Atomic).is_err());
/// ```
pub fn structure_for(
    dequeue: DequeuePolicy,
    enqueue: EnqueuePolicy,
    lock_mode: LockMode,
) -> Result<Structure, ConfigError> {
    use DequeuePolicy as D;
    use EnqueuePolicy as E;
    let incompatible = |hint| ConfigError::IncompatiblePolicies {
        dequeue,
        enqueue,
        hint,
    };
    match dequeue {
        D::Global => match enqueue {
            E::Global => Ok(Structure::GlobalFifo),
            _ => Err(incompatible("Global pairs only with Global")),
        },
        D::DistributedFcfs => match enqueue {
            E::StaticFcfs | E::RandomFcfs => Ok(Structure::DistributedFifo),
            _ => Err(incompatible(
                "Distributed FCFS pairs only with Static FCFS and Random FCFS",
            )),
        },
        _ => match enqueue {
            E::Static | E::Random | E::Sequential | E::PrimaryFixed | E::PrimaryRandom => {
                Ok(Structure::MultiAccess(lock_mode))
            }
            _ => Err(incompatible(
                "multi-access dequeue policies pair only with Static, Random, Sequential, \
                 Primary/Fixed and Primary/Random",
            )),
        },
    }
}

/// How a consumer reached the queue it claims from.
///
/// ```
/// assert_ne!(partita_queues::Role::Primary, partita_queues::Role::Secondary);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The consumer's (or producer's) own queue.
    Primary,
    /// A queue of a suspended worker given to this consumer (process control).
    Extra,
    /// Any other queue the policy sends it to.
    Secondary,
}

/// The per-consumer data a dequeue policy needs: plain data, no queues.
///
/// ```
/// use partita_queues::{DequeueCursor, XorShift64};
/// let c = DequeueCursor::new(1, 3, XorShift64::new(1));
/// assert_eq!((c.home, c.ring), (1, 2));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DequeueCursor {
    /// The primary queue `p`.
    pub home: usize,
    /// Sequential's persistent ring index (next secondary queue to search).
    pub ring: usize,
    /// The consumer's random number generator.
    pub rng: XorShift64,
}

impl DequeueCursor {
    /// A cursor for a consumer whose primary queue is `home` among `n` queues; the ring index
    /// starts at `home + 1`.
    ///
    /// ```
    /// let c = partita_queues::DequeueCursor::new(2, 3, partita_queues::XorShift64::new(0));
    /// assert_eq!(c.ring, 0);
    /// ```
    pub fn new(home: usize, n: usize, rng: XorShift64) -> Self {
        Self {
            home,
            ring: if n == 0 { 0 } else { (home + 1) % n },
            rng,
        }
    }
}

/// Runs one dequeue decision of `policy` over `n` queues.
///
/// `try_claim(q, role)` tries to claim a task from queue `q` and returns whether it got one;
/// a `false` means the consumer saw `q` empty at this decision. The function returns the queue
/// and role of the successful claim, or `None` when every queue the policy allows at this
/// decision was seen empty. `extra` are queues of suspended workers this consumer also serves
/// (process control); they are searched after the primary and before the policy's secondaries.
///
/// For `Global` pass `n = 1` (the single global queue is queue 0).
///
/// ```
/// use partita_queues::{dequeue_search, DequeueCursor, DequeuePolicy, Role, XorShift64};
/// // Queues 0 and 2 hold tasks; consumer 0 uses Primary/Sequential.
/// let mut queues = vec![0, 0, 1];
/// let mut cur = DequeueCursor::new(0, 3, XorShift64::new(1));
/// let got = dequeue_search(DequeuePolicy::PrimarySequential, &mut cur, 3, &[], |q, _| {
///     if queues[q] > 0 { queues[q] -= 1; true } else { false }
/// });
/// assert_eq!(got, Some((2, Role::Secondary)));
/// ```
pub fn dequeue_search(
    policy: DequeuePolicy,
    cur: &mut DequeueCursor,
    n: usize,
    extra: &[usize],
    mut try_claim: impl FnMut(usize, Role) -> bool,
) -> Option<(usize, Role)> {
    if n == 0 {
        return None;
    }
    let p = below(cur.home, n);
    if policy == DequeuePolicy::Random {
        let q = cur.rng.below(n);
        let role = if q == p {
            Role::Primary
        } else {
            Role::Secondary
        };
        if try_claim(q, role) {
            return Some((q, role));
        }
        return search_extra(p, n, extra, &mut try_claim);
    }
    if try_claim(p, Role::Primary) {
        return Some((p, Role::Primary));
    }
    if let Some(hit) = search_extra(p, n, extra, &mut try_claim) {
        return Some(hit);
    }
    match policy {
        DequeuePolicy::Static | DequeuePolicy::Global | DequeuePolicy::Random => None,
        DequeuePolicy::PrimaryFixed => {
            let s = (p + 1) % n;
            (s != p && try_claim(s, Role::Secondary)).then_some((s, Role::Secondary))
        }
        DequeuePolicy::PrimaryRandom => {
            if n < 2 {
                return None;
            }
            let s = other_than(&mut cur.rng, p, n);
            try_claim(s, Role::Secondary).then_some((s, Role::Secondary))
        }
        DequeuePolicy::PrimarySequential | DequeuePolicy::DistributedFcfs => (1..n)
            .map(|i| (p + i) % n)
            .find(|&q| try_claim(q, Role::Secondary))
            .map(|q| (q, Role::Secondary)),
        DequeuePolicy::Sequential => {
            // Up to n positions of the ring, skipping the primary; the index stays on a queue
            // that yields a task and otherwise moves one step, so after a fruitless full cycle
            // it is back where it started.
            for _ in 0..n {
                let q = cur.ring % n;
                if q != p && try_claim(q, Role::Secondary) {
                    cur.ring = q;
                    return Some((q, Role::Secondary));
                }
                cur.ring = (q + 1) % n;
            }
            None
        }
    }
}

fn search_extra(
    p: usize,
    n: usize,
    extra: &[usize],
    try_claim: &mut impl FnMut(usize, Role) -> bool,
) -> Option<(usize, Role)> {
    extra
        .iter()
        .map(|&q| q % n)
        .filter(|&q| q != p)
        .find(|&q| try_claim(q, Role::Extra))
        .map(|q| (q, Role::Extra))
}

/// `x mod n` without a division in the common case `x < n` (ids are usually queue indices).
#[inline]
fn below(x: usize, n: usize) -> usize {
    if x < n {
        x
    } else {
        x % n
    }
}

/// A uniform queue in `0..n` other than `p` (`n >= 2`).
fn other_than(rng: &mut XorShift64, p: usize, n: usize) -> usize {
    let r = rng.below(n - 1);
    if r >= p {
        r + 1
    } else {
        r
    }
}

/// The per-producer data an enqueue policy needs: plain data, no queues.
///
/// ```
/// let c = partita_queues::EnqueueCursor::new(4, partita_queues::XorShift64::new(9));
/// assert_eq!((c.id, c.posts), (4, 0));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnqueueCursor {
    /// The producer id; its primary queue is `id mod N`.
    pub id: usize,
    /// Number of choices made so far (Sequential's `k`).
    pub posts: u64,
    /// The producer's random number generator.
    pub rng: XorShift64,
}

impl EnqueueCursor {
    /// A cursor for producer `id`.
    ///
    /// ```
    /// let c = partita_queues::EnqueueCursor::new(0, partita_queues::XorShift64::new(0));
    /// assert_eq!(c.posts, 0);
    /// ```
    pub fn new(id: usize, rng: XorShift64) -> Self {
        Self { id, posts: 0, rng }
    }
}

/// Picks the queue for one post of `policy` over `n` queues (`n >= 1`).
///
/// `ready_len(q)` is the number of ready tasks in queue `q` (only the Primary/* policies ask,
/// and only for the primary). Returns the queue and whether it is the producer's primary.
///
/// ```
/// use partita_queues::{enqueue_choice, EnqueueCursor, EnqueuePolicy, Role, XorShift64};
/// let mut cur = EnqueueCursor::new(1, XorShift64::new(0));
/// // Primary (queue 1) holds 4 ready tasks, cutoff is 4: go to the fixed secondary.
/// let lens = [0, 4, 0];
/// assert_eq!(
///     enqueue_choice(EnqueuePolicy::PrimaryFixed, &mut cur, 3, 4, |q| lens[q]),
///     (2, Role::Secondary)
/// );
/// ```
pub fn enqueue_choice(
    policy: EnqueuePolicy,
    cur: &mut EnqueueCursor,
    n: usize,
    cutoff: usize,
    ready_len: impl Fn(usize) -> usize,
) -> (usize, Role) {
    let n = n.max(1);
    let k = cur.posts;
    cur.posts = cur.posts.wrapping_add(1);
    let p = below(cur.id, n);
    let primary_or = |q: usize| {
        if q == p {
            (q, Role::Primary)
        } else {
            (q, Role::Secondary)
        }
    };
    match policy {
        EnqueuePolicy::Static | EnqueuePolicy::StaticFcfs => (p, Role::Primary),
        EnqueuePolicy::Global => (0, Role::Primary),
        EnqueuePolicy::Random | EnqueuePolicy::RandomFcfs => primary_or(cur.rng.below(n)),
        EnqueuePolicy::Sequential => primary_or((p + (k % n as u64) as usize) % n),
        EnqueuePolicy::PrimaryFixed | EnqueuePolicy::PrimaryRandom => {
            if n < 2 || ready_len(p) < cutoff {
                (p, Role::Primary)
            } else if policy == EnqueuePolicy::PrimaryFixed {
                ((p + 1) % n, Role::Secondary)
            } else {
                (other_than(&mut cur.rng, p, n), Role::Secondary)
            }
        }
    }
}

// Shared helpers for the integration tests (included with `mod common;`).
#![allow(dead_code)]

use partita_queues::{Config, DequeuePolicy, EnqueuePolicy, LockMode};

/// Every compatible (dequeue, enqueue) pair of Table 3.
pub fn compatible_pairs() -> Vec<(DequeuePolicy, EnqueuePolicy)> {
    let mut pairs = Vec::new();
    for d in DequeuePolicy::MULTI_ACCESS {
        for e in EnqueuePolicy::MULTI_ACCESS {
            pairs.push((d, e));
        }
    }
    pairs.push((DequeuePolicy::Global, EnqueuePolicy::Global));
    pairs.push((DequeuePolicy::DistributedFcfs, EnqueuePolicy::StaticFcfs));
    pairs.push((DequeuePolicy::DistributedFcfs, EnqueuePolicy::RandomFcfs));
    pairs
}

/// A configuration for a pair; `queues >= 2` so every pair is legal.
pub fn config(
    pair: (DequeuePolicy, EnqueuePolicy),
    queues: usize,
    mode: LockMode,
    slots: usize,
    seed: u64,
) -> Config {
    let (d, e) = pair;
    if d == DequeuePolicy::Global {
        Config::global_fifo(queues).seed(seed)
    } else {
        Config::new(queues)
            .dequeue(d)
            .enqueue(e)
            .lock_mode(mode)
            .slots(slots)
            .cutoff(slots.div_ceil(2))
            .seed(seed)
    }
}

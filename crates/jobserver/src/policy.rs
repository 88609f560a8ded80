//! The token policy: pure functions over what the server observed in one tick.
//!
//! A GNU make jobserver hands out tokens (bytes in a pipe); a client runs one job without a
//! token (its implicit slot) and one more per token it holds. So a build given `allocation`
//! CPUs may have `allocation - 1` tokens in circulation. Circulation is the number of tokens
//! that exist, in the pipe or held by clients; the server changes it only by writing tokens
//! (growth), by keeping tokens it reads back (shrink: withheld as they come back), and by
//! writing off tokens no live job can hold (reclaim).

/// Tokens that may circulate for an allocation of `allocation` CPUs. An allocation of 0 (a
/// granted zero quantum) also gives 0 tokens: the implicit slot cannot be taken away.
///
/// ```
/// use partita_jobserver::policy::tokens_allowed;
/// assert_eq!(tokens_allowed(4), 3);
/// assert_eq!(tokens_allowed(0), 0);
/// ```
pub fn tokens_allowed(allocation: u32) -> u32 {
    allocation.saturating_sub(1)
}

/// Demand reported to the manager: the implicit slot, the tokens out, and one per client thread
/// blocked waiting for a token; at most `pool`, at least 1.
///
/// ```
/// assert_eq!(partita_jobserver::policy::demand(3, 2, 16), 6);
/// assert_eq!(partita_jobserver::policy::demand(15, 9, 16), 16);
/// ```
pub fn demand(out: u32, waiting: u32, pool: u32) -> u32 {
    1u32.saturating_add(out)
        .saturating_add(waiting)
        .min(pool)
        .max(1)
}

/// Clients waiting for a token: as seen in `/proc` when the clients' system-call state can be
/// read; otherwise a probe: one waiter whenever the fifo is empty (every token is out), none
/// when a token lies unused in it. The probe asks for one CPU more while the build uses every
/// token it has, and gives it back once a token goes unused.
///
/// ```
/// use partita_jobserver::policy::waiting;
/// assert_eq!(waiting(Some(3), 0), 3);
/// assert_eq!(waiting(None, 0), 1);
/// assert_eq!(waiting(None, 2), 0);
/// ```
pub fn waiting(seen: Option<u32>, in_pipe: u32) -> u32 {
    match seen {
        Some(n) => n,
        None => u32::from(in_pipe == 0),
    }
}

/// What the server saw in one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observation {
    /// Tokens in circulation before this tick.
    pub circulation: u32,
    /// Bytes in the pipe now (`FIONREAD`).
    pub in_pipe: u32,
    /// Tokens the allocation allows ([`tokens_allowed`]).
    pub allowed: u32,
    /// Most tokens the build's live clients can hold ([`crate::procscan::TreeScan`]'s
    /// `tokens_justified`), when the build's process tree could be read.
    pub live_jobs: Option<u32>,
    /// Whether tokens out have exceeded `live_jobs` long enough to be written off.
    pub leak_confirmed: bool,
}

/// What the server does in one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Plan {
    /// Bytes beyond the circulation: not tokens (a client wrote garbage or returned a token it
    /// never took); read and discard them.
    pub drain_excess: u32,
    /// Tokens held by no live job: write them off (the server writes new ones if allowed).
    pub reclaim: u32,
    /// Tokens to read back from the pipe and keep (shrink).
    pub withhold: u32,
    /// New tokens to write (growth).
    pub write: u32,
}

/// Tokens out (held by clients) given circulation and bytes in the pipe.
///
/// ```
/// assert_eq!(partita_jobserver::policy::tokens_out(5, 2), 3);
/// assert_eq!(partita_jobserver::policy::tokens_out(5, 9), 0);
/// ```
pub fn tokens_out(circulation: u32, in_pipe: u32) -> u32 {
    circulation.saturating_sub(in_pipe)
}

/// Whether `out` tokens cannot all be held by `live_jobs` tasks (a leak, if it persists: a
/// client that took tokens died without returning them).
///
/// ```
/// assert!(partita_jobserver::policy::leak_suspected(3, Some(1)));
/// assert!(!partita_jobserver::policy::leak_suspected(3, None));
/// ```
pub fn leak_suspected(out: u32, live_jobs: Option<u32>) -> bool {
    live_jobs.is_some_and(|live| out > live)
}

/// Decide one tick.
///
/// ```
/// use partita_jobserver::policy::{plan, Observation};
/// // Growth from 1 to 3 tokens: write 2 at once.
/// let p = plan(&Observation { circulation: 1, in_pipe: 1, allowed: 3, ..Default::default() });
/// assert_eq!(p.write, 2);
/// // Shrink from 3 to 1 while 2 tokens are out and 1 in the pipe: take back the 1 now.
/// let p = plan(&Observation { circulation: 3, in_pipe: 1, allowed: 1, ..Default::default() });
/// assert_eq!((p.withhold, p.write), (1, 0));
/// ```
pub fn plan(o: &Observation) -> Plan {
    let drain_excess = o.in_pipe.saturating_sub(o.circulation);
    let in_pipe = o.in_pipe - drain_excess;
    let out = tokens_out(o.circulation, in_pipe);
    let reclaim = match o.live_jobs {
        Some(live) if o.leak_confirmed => out.saturating_sub(live),
        _ => 0,
    };
    let circulation = o.circulation - reclaim;
    let (withhold, write) = if circulation > o.allowed {
        ((circulation - o.allowed).min(in_pipe), 0)
    } else {
        (0, o.allowed - circulation)
    };
    Plan {
        drain_excess,
        reclaim,
        withhold,
        write,
    }
}

/// Circulation after applying a plan in full.
///
/// ```
/// use partita_jobserver::policy::{after, Plan};
/// assert_eq!(after(4, &Plan { reclaim: 1, withhold: 1, ..Default::default() }), 2);
/// ```
pub fn after(circulation: u32, p: &Plan) -> u32 {
    circulation - p.reclaim - p.withhold + p.write
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn plan_invariants(circ in 0u32..64, in_pipe in 0u32..128, allowed in 0u32..64,
                           live in proptest::option::of(0u32..64), confirmed: bool) {
            let o = Observation { circulation: circ, in_pipe, allowed, live_jobs: live, leak_confirmed: confirmed };
            let p = plan(&o);
            let real_in_pipe = in_pipe.min(circ);
            let out = circ - real_in_pipe;
            let c = after(circ, &p);
            // Excess bytes are exactly what exceeds circulation.
            prop_assert_eq!(p.drain_excess, in_pipe.saturating_sub(circ));
            // Only tokens in the pipe can be withheld; only tokens out can be reclaimed.
            prop_assert!(p.withhold <= real_in_pipe);
            prop_assert!(p.reclaim <= out);
            // Never both grow and shrink.
            prop_assert!(p.write == 0 || p.withhold == 0);
            // Circulation reaches the allowance unless tokens still out prevent it, and never
            // grows beyond it.
            prop_assert!(c >= allowed.min(circ - p.reclaim) || c == allowed);
            prop_assert!(c <= allowed.max(out - p.reclaim));
            if circ - p.reclaim <= allowed { prop_assert_eq!(c, allowed); }
            // No reclaim without a confirmed leak and a tree to compare with.
            if !confirmed || live.is_none() { prop_assert_eq!(p.reclaim, 0); }
            // After reclaiming, what is out fits the live jobs.
            if let (true, Some(l)) = (confirmed, live) { prop_assert!(out - p.reclaim <= l); }
        }

        #[test]
        fn demand_is_bounded(out in 0u32..100, waiting in 0u32..100, pool in 1u32..64) {
            let d = demand(out, waiting, pool);
            prop_assert!((1..=pool).contains(&d));
            prop_assert!(d >= (1 + out).min(pool));
        }
    }
}

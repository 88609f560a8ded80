//! The `partita::hop` stamps: one `trace` event per hop of a reaction (a demand change
//! travelling from one pool, through the manager, to another pool's workers), carrying the
//! clock below. Both sides of the socket stamp, so the stamp and its clock are defined here,
//! once: the `reaction` example enables the target in every process and orders the events of
//! all of them by `t`.
//!
//! While no subscriber enables the target, tracing's callsite cache reduces a stamp to a load
//! and a branch and the clock is not read; the runtime stamps on its park, resume and client
//! paths, never on a task's safe point.

/// The clock of the stamps, in ns: on Linux `CLOCK_MONOTONIC` ([`crate::sys::monotonic_ns`],
/// comparable across processes).
#[cfg(target_os = "linux")]
pub use crate::sys::monotonic_ns as clock_ns;

/// The clock of the stamps, in ns: off Linux (no manager, so no other process reads them) the
/// time since the process's first stamp.
///
/// ```
/// let a = partita_protocol::hop::clock_ns();
/// assert!(partita_protocol::hop::clock_ns() >= a);
/// ```
#[cfg(not(target_os = "linux"))]
pub fn clock_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

#[doc(hidden)]
pub use tracing as __tracing;

/// Stamp one hop: a `trace` event of target `partita::hop` with `hop = NAME`, `t =`
/// [`hop::clock_ns`](crate::hop::clock_ns) and any further `key = value` fields.
///
/// ```
/// partita_protocol::hop!("park", worker = 3);
/// ```
#[macro_export]
macro_rules! hop {
    ($name:literal $(, $k:ident = $v:expr)* $(,)?) => {
        $crate::hop::__tracing::trace!(
            target: "partita::hop",
            hop = $name,
            t = $crate::hop::clock_ns()
            $(, $k = $v)*
        )
    };
}

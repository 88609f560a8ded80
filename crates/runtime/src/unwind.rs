//! Catching and re-raising panics across job boundaries, as rayon-core does.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::thread;

/// Run `func`, returning `Err(payload)` instead of unwinding past this frame.
pub(crate) fn halt_unwinding<F, R>(func: F) -> thread::Result<R>
where
    F: FnOnce() -> R,
{
    panic::catch_unwind(AssertUnwindSafe(func))
}

/// Continue a panic captured by [`halt_unwinding`] on the current thread.
pub(crate) fn resume_unwinding(payload: Box<dyn Any + Send>) -> ! {
    panic::resume_unwind(payload)
}

/// Aborts the process if dropped while unwinding: guards code that must not unwind (a worker's
/// main loop, a spawned job without a panic handler), exactly like rayon-core.
pub(crate) struct AbortIfPanic;

impl Drop for AbortIfPanic {
    fn drop(&mut self) {
        eprintln!("partita-runtime: detected unexpected panic; aborting");
        std::process::abort();
    }
}

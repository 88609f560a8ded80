//! The control page's seqlock, written once over plain atomics so that the same code runs on
//! the page (std atomics in shared memory) and under loom (`RUSTFLAGS="--cfg loom" cargo test
//! -p partita-protocol --release seqlock`), which explores every interleaving and memory
//! ordering the model allows.
//!
//! Single writer. Write: make the epoch odd, release fence, store the data (relaxed), store the
//! next even epoch with release. Read: acquire-load the epoch (retry if odd), load the data
//! (relaxed), acquire fence, load the epoch again; the data is consistent iff both epochs are
//! equal. (Boehm, "Can seqlocks get along with programming language memory models?", 2012.)

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Publish `(target, words)`. Only one thread may write a given seqlock.
pub(crate) fn write(
    epoch: &AtomicU64,
    target: &AtomicU32,
    slots: &[AtomicU64],
    new_target: u32,
    new_words: &[u64],
) {
    let e = epoch.load(Ordering::Relaxed);
    epoch.store(e.wrapping_add(1), Ordering::Relaxed);
    fence(Ordering::Release);
    target.store(new_target, Ordering::Relaxed);
    for (slot, w) in slots.iter().zip(new_words) {
        slot.store(*w, Ordering::Relaxed);
    }
    epoch.store(e.wrapping_add(2), Ordering::Release);
}

/// One read attempt: `Some((epoch, target))` with `out` filled if it saw a consistent state.
pub(crate) fn try_read(
    epoch: &AtomicU64,
    target: &AtomicU32,
    slots: &[AtomicU64],
    out: &mut [u64],
) -> Option<(u64, u32)> {
    let e1 = epoch.load(Ordering::Acquire);
    if e1 % 2 == 1 {
        return None;
    }
    let t = target.load(Ordering::Relaxed);
    for (w, slot) in out.iter_mut().zip(slots) {
        *w = slot.load(Ordering::Relaxed);
    }
    fence(Ordering::Acquire);
    let e2 = epoch.load(Ordering::Relaxed);
    (e1 == e2).then_some((e1, t))
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A reader never accepts a torn `(target, words)`: the writer keeps both words equal to
    /// the target, so any accepted read must see them equal too.
    #[test]
    fn reader_never_accepts_a_torn_write() {
        loom::model(|| {
            let s = Arc::new((
                AtomicU64::new(0),
                AtomicU32::new(0),
                [AtomicU64::new(0), AtomicU64::new(0)],
            ));
            let w = {
                let s = s.clone();
                loom::thread::spawn(move || {
                    write(&s.0, &s.1, &s.2, 1, &[1, 1]);
                    write(&s.0, &s.1, &s.2, 2, &[2, 2]);
                })
            };
            let mut out = [0u64; 2];
            if let Some((e, t)) = try_read(&s.0, &s.1, &s.2, &mut out) {
                assert_eq!(e % 2, 0);
                assert_eq!(out, [t as u64, t as u64], "torn read at epoch {e}");
                assert_eq!(e / 2, t as u64, "epoch and data disagree");
            }
            w.join().unwrap();
        });
    }
}

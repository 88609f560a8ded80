//! An unmodified rayon program with a large heap: it keeps its data in a plain `Vec`,
//! allocated and first touched by the pool's workers through `par_iter`, and sweeps it with
//! `par_chunks` while busy. It knows nothing of NUMA or of Partita; the `[patch.crates-io]`
//! line in Cargo.toml runs it on partita-runtime, which registers it with a manager
//! (`PARTITA_SOCKET`, `PARTITA_NAME`) that decides its CPUs — and, on a machine with several
//! NUMA nodes, moves its heap after them (issue 31; the two-node VM test drives it).
//!
//! Driven by line commands on stdin, one reply line each on stdout:
//!
//! - `alloc BYTES`: allocate the heap (`BYTES / 8` `u64`s, collected from a parallel
//!   iterator, so the pool's workers write — and first touch — every page); `ok PAGES`;
//! - `busy`: sweep the heap (one word per 4 KiB page, over and over) on the pool; `ok`;
//! - `idle`: stop sweeping (the pool has nothing to do); `ok`;
//! - anything else, or end of input: exit.
//!
//! ```sh
//! cargo run --release      # then type `alloc 268435456`, `busy`, and watch `partita status`
//! ```
use rayon::prelude::*;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// `u64`s per 4 KiB page: the sweep reads one of each page.
const WORDS_PER_PAGE: usize = 512;
/// `u64`s per task of the sweep (2 MiB).
const CHUNK: usize = 1 << 18;

static HEAP: OnceLock<Vec<u64>> = OnceLock::new();

fn main() {
    let busy = Arc::new(AtomicBool::new(false));
    {
        let busy = busy.clone();
        std::thread::spawn(move || sweep(&busy));
    }
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let mut words = line.split_whitespace();
        let reply = match (words.next(), words.next().map(str::parse::<usize>)) {
            (Some("alloc"), Some(Ok(bytes))) => alloc(bytes),
            (Some("busy"), None) => {
                busy.store(true, Ordering::Relaxed);
                "ok".to_string()
            }
            (Some("idle"), None) => {
                busy.store(false, Ordering::Relaxed);
                "ok".to_string()
            }
            _ => break,
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
}

/// The heap, written by the pool's workers (rayon collects an indexed iterator in place).
fn alloc(bytes: usize) -> String {
    if HEAP.get().is_some() {
        return "error the heap exists".to_string();
    }
    let heap: Vec<u64> = (0..bytes / 8)
        .into_par_iter()
        .map(|i| i as u64 | 1)
        .collect();
    let pages = heap.len() / WORDS_PER_PAGE;
    let _ = HEAP.set(heap);
    format!("ok {pages}")
}

/// While `busy`, the pool reads one word of every page of the heap, pass after pass (before
/// the heap exists, it adds numbers: the pool is busy either way).
fn sweep(busy: &AtomicBool) {
    let mut total = 0u64;
    loop {
        if !busy.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let pass = match HEAP.get() {
            Some(h) => h
                .par_chunks(CHUNK)
                .map(|c| {
                    c.iter()
                        .step_by(WORDS_PER_PAGE)
                        .fold(0u64, |a, x| a.wrapping_add(*x))
                })
                .reduce(|| 0, u64::wrapping_add),
            None => (0..1u64 << 20).into_par_iter().map(|x| x ^ total).sum(),
        };
        total = std::hint::black_box(total.wrapping_add(pass));
    }
}

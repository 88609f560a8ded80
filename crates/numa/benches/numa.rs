//! Criterion benchmarks for partita-numa on the local machine:
//! - `alloc/*`: `NodeVec` allocation + initialisation of 4 MiB, first touch vs bound vs
//!   interleaved vs preferred, with `Vec` as the baseline measured in the same run;
//! - `move_pages/*`: the `move_pages_to` wrapper vs the raw system call (on a one-node machine
//!   the pages are already on the target node, so this isolates the wrapper's own cost);
//! - `fault_sampling/*`: touching 256 pages with and without every page armed (the cost of
//!   page-fault sampling per sampled access).
//!
//! The real cross-node move cost is measured in the two-node VM (`vm/run.sh`).
//! Run: `cargo bench -p partita-numa --bench numa`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use partita_numa::counters::FaultSampler;
use partita_numa::{MoveScope, NodeVec, Placement, move_pages_to, page_size};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

const BYTES: usize = 4 << 20;

fn alloc(c: &mut Criterion) {
    let n = BYTES / 8;
    let mut g = c.benchmark_group("alloc");
    g.throughput(Throughput::Bytes(BYTES as u64));
    g.sample_size(30);
    g.bench_function("Vec (baseline)", |b| {
        b.iter(|| black_box((0..n as u64).collect::<Vec<u64>>()))
    });
    let placements = [
        ("first-touch", Placement::FirstTouch),
        ("bound node 0", Placement::Node(0)),
        ("preferred node 0", Placement::Preferred(0)),
        (
            "interleave all",
            Placement::Interleave(partita_numa::online_nodes()),
        ),
        ("first-touch-on node 0", Placement::FirstTouchOn(0)),
    ];
    for (name, p) in placements {
        g.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    NodeVec::from_fn(n, p, |i| i as u64).expect("placement on an online node"),
                )
            })
        });
    }
    g.finish();
}

fn raw_move(pages: &[*mut libc::c_void], nodes: &[libc::c_int], status: &mut [libc::c_int]) -> i64 {
    // SAFETY: the three arrays are live and of equal length; the kernel writes only `status`.
    unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            2,
        )
    }
}

fn move_pages(c: &mut Criterion) {
    const N: usize = 512;
    let v = NodeVec::from_fn(N * page_size() / 8, Placement::Node(0), |i| i as u64)
        .expect("node 0 exists");
    let addrs: Vec<usize> = v.pages().expect("non-empty").page_addresses().collect();
    let ptrs: Vec<*mut libc::c_void> = addrs.iter().map(|a| *a as *mut libc::c_void).collect();
    let mut g = c.benchmark_group("move_pages");
    g.throughput(Throughput::Elements(N as u64));
    for batch in [1usize, 16, 512] {
        let nodes = vec![0 as libc::c_int; batch];
        let mut status = vec![0 as libc::c_int; N];
        g.bench_with_input(BenchmarkId::new("raw", batch), &batch, |b, &batch| {
            b.iter(|| {
                for (chunk, st) in ptrs.chunks(batch).zip(status.chunks_mut(batch)) {
                    black_box(raw_move(chunk, &nodes[..chunk.len()], st));
                }
            })
        });
        g.bench_with_input(BenchmarkId::new("wrapper", batch), &batch, |b, &batch| {
            b.iter(|| {
                black_box(
                    move_pages_to(&addrs, 0, batch, MoveScope::Exclusive).expect("valid input"),
                )
            })
        });
    }
    g.finish();
}

fn fault_sampling(c: &mut Criterion) {
    const PAGES: usize = 256;
    let wp = page_size() / 8;
    let v =
        NodeVec::from_fn(PAGES * wp, Placement::FirstTouch, |_| AtomicU64::new(0)).expect("mmap");
    let touch = |v: &NodeVec<AtomicU64>| {
        for p in 0..PAGES {
            v[p * wp].fetch_add(1, Ordering::Relaxed);
        }
    };
    let mut g = c.benchmark_group("fault_sampling");
    g.throughput(Throughput::Elements(PAGES as u64));
    g.bench_function("touch, unarmed", |b| b.iter(|| touch(&v)));
    let s = FaultSampler::new(
        &v,
        partita_numa::online_nodes()
            .max()
            .map_or(1, |m| m as usize + 1),
    )
    .expect("sampler");
    g.bench_function("arm + touch (every access faults)", |b| {
        b.iter(|| {
            s.arm_all().expect("mprotect");
            touch(&v);
        })
    });
    g.bench_function("arm only", |b| b.iter(|| s.arm_all().expect("mprotect")));
    g.finish();
    drop(s);
}

criterion_group!(benches, alloc, move_pages, fault_sampling);
criterion_main!(benches);

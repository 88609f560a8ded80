//! Parallel sum over a slice by recursive halving with `join`.
//!
//! `cargo run -p partita-runtime --release --example parallel_sum`

fn sum(v: &[u64]) -> u64 {
    if v.len() <= 10_000 {
        return v.iter().sum();
    }
    let (lo, hi) = v.split_at(v.len() / 2);
    let (a, b) = partita_runtime::join(|| sum(lo), || sum(hi));
    a + b
}

fn main() {
    let v: Vec<u64> = (1..=10_000_000).collect();
    let pool = partita_runtime::ThreadPoolBuilder::new()
        .build()
        .expect("pool");
    let total = pool.install(|| sum(&v));
    println!(
        "sum of 1..=10^7 = {total} ({} workers)",
        pool.current_num_threads()
    );
    assert_eq!(total, 10_000_000 * 10_000_001 / 2);
}

//! Parallel quicksort with `join`: sort 10^6 numbers and check the result.
//!
//! `cargo run -p partita-runtime --release --example quicksort`

fn quick_sort<T: PartialOrd + Send>(v: &mut [T]) {
    if v.len() <= 1_000 {
        // Small slices: sequential sort is cheaper than splitting further.
        v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    partita_runtime::join(|| quick_sort(lo), || quick_sort(&mut hi[1..]));
}

/// Lomuto partition around the last element; returns the pivot's final index.
fn partition<T: PartialOrd>(v: &mut [T]) -> usize {
    let pivot = v.len() - 1;
    let mut i = 0;
    for j in 0..pivot {
        if v[j] <= v[pivot] {
            v.swap(i, j);
            i += 1;
        }
    }
    v.swap(i, pivot);
    i
}

fn main() {
    let mut x = 88_172_645_463_325_252u64;
    let mut v: Vec<u32> = (0..1_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        })
        .collect();
    let start = std::time::Instant::now();
    quick_sort(&mut v);
    println!(
        "sorted {} numbers on {} workers in {:?}",
        v.len(),
        partita_runtime::current_num_threads(),
        start.elapsed()
    );
    assert!(v.windows(2).all(|w| w[0] <= w[1]));
}

//! The Spice/chili tree-sum (a `join` at every node of a binary tree), small enough to run
//! under `valgrind --tool=callgrind`, which counts instructions whatever the machine's load:
//! the cost of a fine-grained `join` per node is the difference between a run with `join`
//! and the sequential one, divided by the nodes summed (docs/bench/runtime.md, issue 29).
//!
//! ```text
//! cargo build --release -p partita-runtime --example tree_sum
//! valgrind --tool=callgrind target/release/examples/tree_sum seq 18 32
//! valgrind --tool=callgrind target/release/examples/tree_sum join 18 32
//! ```
//!
//! Arguments: `seq` or `join` (one worker, heartbeat at its default interval), the tree's
//! layers (2^layers - 1 nodes), the number of sums. Prints the checksum and the time.

use std::hint::black_box;
use std::time::{Duration, Instant};

struct Node {
    val: u64,
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
}

fn tree(layers: u32, next: &mut u64) -> Option<Box<Node>> {
    if layers == 0 {
        return None;
    }
    let left = tree(layers - 1, next);
    *next += 1;
    let val = *next;
    let right = tree(layers - 1, next);
    Some(Box::new(Node { val, left, right }))
}

fn seq_sum(node: &Node) -> u64 {
    let l = node.left.as_deref().map_or(0, seq_sum);
    let r = node.right.as_deref().map_or(0, seq_sum);
    node.val + l + r
}

fn join_sum(node: &Node) -> u64 {
    let (l, r) = partita_runtime::join(
        || node.left.as_deref().map_or(0, join_sum),
        || node.right.as_deref().map_or(0, join_sum),
    );
    node.val + l + r
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: tree_sum seq|join <layers> <sums>";
    let (Some(mode), Some(layers), Some(sums)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (Ok(layers), Ok(sums)) = (layers.parse::<u32>(), sums.parse::<u32>()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    if !(1..=30).contains(&layers) {
        eprintln!("layers: 1 to 30");
        std::process::exit(2);
    }
    let root = tree(layers, &mut 0).expect("layers > 0");
    let run = |sum: &dyn Fn(&Node) -> u64| {
        let t = Instant::now();
        let total = (0..sums).fold(0, |a, _| a ^ sum(black_box(&root)));
        (total, t.elapsed())
    };
    let (total, took): (u64, Duration) = match mode.as_str() {
        "seq" => run(&seq_sum),
        "join" => {
            let pool = partita_runtime::ThreadPoolBuilder::new()
                .num_threads(1)
                .process_control(partita_runtime::ProcessControl::Standalone)
                .heartbeat_interval(Some(Duration::from_micros(100)))
                .build()
                .unwrap_or_else(|e| {
                    eprintln!("pool: {e}");
                    std::process::exit(1)
                });
            pool.install(|| run(&join_sum))
        }
        other => {
            eprintln!("{other}: {usage}");
            std::process::exit(2);
        }
    };
    println!("{mode} {layers} layers × {sums}: checksum {total}, {took:?}");
}

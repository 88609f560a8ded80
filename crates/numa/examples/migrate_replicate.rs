//! Trace-driven simulation of Verghese's migrate/replicate policy (numa.md §Simulator).
//!
//! Prints the thesis' Table 10 shape (locality, stall, overhead and moves per workload and
//! policy), the Fig. 23 shape (what the hot-page decisions became under Mig/Rep) and the
//! trigger sweep 32…256.
//!
//! ```text
//! cargo run --release -p partita-numa --example migrate_replicate            # 8 nodes, 1 s traces
//! cargo run --release -p partita-numa --example migrate_replicate -- --small # 4 nodes, 400 ms
//! ```

use partita_numa::sim::{
    SimConfig, TraceConfig, format_decisions, format_sweep, format_table, run_table, trigger_sweep,
};

fn main() {
    let small = std::env::args().any(|a| a == "--small");
    let tc = if small {
        TraceConfig::small()
    } else {
        TraceConfig::default()
    };
    let cfg = SimConfig::default();
    println!(
        "machine: {} nodes, local {} ns, remote {} ns, move {} us; trigger {}, sharing {}, \
         cool-down {} ms, reset {} ms; traces of {} ms, one miss per node every {} ns",
        tc.nodes,
        cfg.local_ns,
        cfg.remote_ns,
        cfg.move_ns / 1000,
        cfg.params.trigger,
        cfg.params.sharing,
        cfg.params.cooldown_ns / 1_000_000,
        cfg.params.reset_interval_ns / 1_000_000,
        tc.duration_ns / 1_000_000,
        tc.miss_interval_ns
    );
    let rows = run_table(&tc, &cfg);
    println!("\n== Table 10 shape: per workload and policy (saved% = stall+overhead vs static)");
    print!("{}", format_table(&rows));
    println!("\n== Fig. 23 shape: outcome of hot-page decisions under Mig/Rep");
    print!("{}", format_decisions(&rows));
    println!("\n== Trigger sweep (Mig/Rep, sharing = trigger/4, all workloads summed)");
    print!(
        "{}",
        format_sweep(&trigger_sweep(&tc, &cfg, &[32, 64, 128, 256]))
    );
}

//! `cargo run --release -p partita-sim --example bandwidth_trace -- LU C quanta-window 1 12`:
//! the bandwidth policy's decisions quantum by quantum in one Fig. 2 run (the list, the
//! samples the jobs brought in, the estimates, the selection), to explain a result of
//! `partita simulate`. Jobs 0 and 1 are the application's instances, 2–5 the
//! microbenchmarks of the set (A: 4 BBMA; B: 4 nBBMA; C: BBMA BBMA nBBMA nBBMA).

use clap::Parser;
use partita_sim::cosched::{trace, turnaround, Coupling, RunConfig, Scheduler};
use partita_sim::workload::{WorkloadSet, APPS};

#[derive(Parser)]
struct Cli {
    /// Application name as in Fig. 2 (e.g. "LU", "Raytrace").
    app: String,
    /// Workload set: A, B or C.
    set: String,
    /// latest-quantum or quanta-window.
    variant: String,
    /// Seed.
    #[arg(default_value_t = 1)]
    seed: u64,
    /// Quanta to print.
    #[arg(default_value_t = 12)]
    quanta: usize,
    /// Yield coupling instead of barrier.
    #[arg(long)]
    yield_coupling: bool,
    /// Override the application's solo rate (tx/µs, whole application).
    #[arg(long)]
    rate: Option<f64>,
    /// Without bursts (a bursty application then issues its mean rate steadily).
    #[arg(long)]
    steady: bool,
}

fn main() {
    let cli = Cli::parse();
    let fail = |what: &str| -> ! {
        eprintln!("bandwidth_trace: {what}");
        std::process::exit(2)
    };
    let Some(&app) = APPS.iter().find(|a| a.name == cli.app) else {
        fail(&format!("unknown application {:?}", cli.app))
    };
    let mut app = app;
    if let Some(r) = cli.rate {
        if !(r.is_finite() && r > 0.0) {
            fail(&format!("--rate {r}: must be a positive number"));
        }
        app.rate = r;
    }
    app.bursty &= !cli.steady;
    let app = &app;
    let set = match cli.set.as_str() {
        "A" => WorkloadSet::A,
        "B" => WorkloadSet::B,
        "C" => WorkloadSet::C,
        s => fail(&format!("unknown set {s:?} (A, B or C)")),
    };
    let sched = match cli.variant.as_str() {
        "latest-quantum" => Scheduler::LatestQuantum,
        "quanta-window" => Scheduler::QuantaWindow,
        v => fail(&format!(
            "unknown variant {v:?} (latest-quantum or quanta-window)"
        )),
    };
    let cfg = RunConfig {
        seed: cli.seed,
        coupling: if cli.yield_coupling {
            Coupling::Yield
        } else {
            Coupling::Barrier
        },
        ..RunConfig::default()
    };
    println!(
        "{:>5}  {:<20} {:<38} {:<38} selected",
        "t (s)", "list (head first)", "samples (tx/us)", "estimates (tx/us)"
    );
    for q in trace(app, set, sched, &cfg, cli.quanta) {
        let samples: Vec<String> = q
            .samples
            .iter()
            .map(|x| x.map_or("-".into(), |v| format!("{v:.1}")))
            .collect();
        let est: Vec<String> = q.estimates.iter().map(|v| format!("{v:.1}")).collect();
        println!(
            "{:>5.1}  {:<20} {:<38} {:<38} {:?}",
            q.t,
            format!("{:?}", q.order),
            samples.join(" "),
            est.join(" "),
            q.selected
        );
    }
    let ts = turnaround(app, set, Scheduler::TimeSharing, &cfg);
    let t = turnaround(app, set, sched, &cfg);
    println!(
        "mean turnaround {t:.1} s (time-sharing {ts:.1} s, improvement {:.1} %)",
        100.0 * (ts - t) / ts
    );
}

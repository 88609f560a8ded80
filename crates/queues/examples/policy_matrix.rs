//! The DiBella policy-matrix experiment and its companions (experiments.md §Ready queues).
//!
//! Producers (the paper's clients) post tasks, consumers (schedulers) poll and serve them.
//! Prints the paper's Table 4 shape per policy pair: mean delay (post → start of service),
//! post rate (tasks posted per ms of producer time), load split (percentage points off an
//! even split per consumer), lost races, overflow posts, empty polls. Service time is a
//! multiple of the measured uncontended queue-operation cost.
//!
//! ```sh
//! cargo run --release -p partita-queues --example policy_matrix -- --experiment matrix \
//!     --producers 2 --consumers 2 --service 0 --arrival nonuniform
//! cargo run --release -p partita-queues --example policy_matrix -- --experiment throughput
//! cargo run --release -p partita-queues --example policy_matrix -- --help
//! ```

use partita_stats::median;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use crossbeam_deque::{Injector, Steal};
use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;
use partita_queues::{
    load_split, Config, ConsumerState, DequeuePolicy, EnqueuePolicy, LockMode, ProducerState,
    ReadyQueues,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Experiment {
    /// E3: the 30 multi-access pairs plus the baselines (Table 4 shape).
    Matrix,
    /// E1: global vs distributed structures, for each arrival mode.
    E1,
    /// E2: Static:Static under non-uniform load (expect the worst split and delay).
    E2,
    /// E4: Sequential:Primary/Random vs Distributed FCFS over a service-time sweep.
    E4,
    /// E7: bidirectional vs one-way scan (lost races).
    E7,
    /// E9: Random vs Primary/Random dequeue with a cheap RNG.
    E9,
    /// Task throughput of each structure with producers posting as fast as a window allows.
    Throughput,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Arrival {
    /// Each producer waits for its previous task to be served (the paper's synchronous).
    Closed,
    /// Every producer waits the same gap between posts.
    Uniform,
    /// Producers are split into one set per queue; set 0 posts at the maximum rate, the others
    /// wait the gap.
    Nonuniform,
}

#[derive(Parser, Debug, Clone)]
#[command(about = "DiBella ready-queue policy experiments (Table 4 shape)")]
struct Args {
    #[arg(long, value_enum, default_value = "matrix")]
    experiment: Experiment,
    /// Producer threads (the paper: 10 clients).
    #[arg(long, default_value_t = 2)]
    producers: usize,
    /// Consumer threads = queues (the paper: 3 schedulers).
    #[arg(long, default_value_t = 2)]
    consumers: usize,
    /// Service time as a multiple of the measured queue-operation cost (0 = NULL operation).
    #[arg(long, default_value_t = 0.0)]
    service: f64,
    #[arg(long, value_enum, default_value = "nonuniform")]
    arrival: Arrival,
    /// Offered load for the uniform and non-uniform modes, as a fraction of the consumers'
    /// capacity (sets the gap between posts).
    #[arg(long, default_value_t = 0.7)]
    load: f64,
    /// Non-uniform mode: the fast set posts this many times as often as the others (the
    /// paper's "maximum possible rate"; a finite factor keeps the total offered load at
    /// `--load`).
    #[arg(long, default_value_t = 4.0)]
    fast_factor: f64,
    /// Tasks per run (all producers together).
    #[arg(long, default_value_t = 100_000)]
    tasks: u64,
    /// Runs per configuration; the table shows the median.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Slots per multi-access queue.
    #[arg(long, default_value_t = 64)]
    slots: usize,
    /// Throughput mode: tasks each producer may have outstanding.
    #[arg(long, default_value_t = 32)]
    window: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// A task: when it was posted (ns since the run's start) and by whom.
#[derive(Clone, Copy, Debug)]
struct Task {
    posted_ns: u64,
    producer: u32,
}

/// Any structure under test: the ready-queue set or a crossbeam baseline.
trait Structure: Sync {
    type P: Send;
    type C: Send;
    fn producer(&self, id: usize) -> Self::P;
    fn consumer(&self, id: usize) -> Self::C;
    fn post(&self, p: &mut Self::P, t: Task);
    fn poll(&self, c: &mut Self::C) -> Option<Task>;
    /// (lost races, empty polls)
    fn consumer_counts(_c: &Self::C) -> (u64, u64) {
        (0, 0)
    }
    /// overflow posts
    fn producer_overflow(_p: &Self::P) -> u64 {
        0
    }
}

impl Structure for ReadyQueues<Task> {
    type P = ProducerState;
    type C = ConsumerState;
    fn producer(&self, id: usize) -> ProducerState {
        ReadyQueues::producer(self, id)
    }
    fn consumer(&self, id: usize) -> ConsumerState {
        ReadyQueues::consumer(self, id)
    }
    fn post(&self, p: &mut ProducerState, t: Task) {
        ReadyQueues::post(self, p, t)
    }
    fn poll(&self, c: &mut ConsumerState) -> Option<Task> {
        ReadyQueues::poll(self, c)
    }
    fn consumer_counts(c: &ConsumerState) -> (u64, u64) {
        (c.stats().lost_races, c.stats().empty_polls)
    }
    fn producer_overflow(p: &ProducerState) -> u64 {
        p.stats().overflow_posts
    }
}

struct CbInjector(Injector<Task>);
impl Structure for CbInjector {
    type P = ();
    type C = u64;
    fn producer(&self, _: usize) {}
    fn consumer(&self, _: usize) -> u64 {
        0
    }
    fn post(&self, _: &mut (), t: Task) {
        self.0.push(t)
    }
    fn poll(&self, empty: &mut u64) -> Option<Task> {
        loop {
            match self.0.steal() {
                Steal::Success(t) => return Some(t),
                Steal::Empty => {
                    *empty += 1;
                    return None;
                }
                Steal::Retry => {}
            }
        }
    }
    fn consumer_counts(c: &u64) -> (u64, u64) {
        (0, *c)
    }
}

struct CbSegQueue(SegQueue<Task>);
impl Structure for CbSegQueue {
    type P = ();
    type C = u64;
    fn producer(&self, _: usize) {}
    fn consumer(&self, _: usize) -> u64 {
        0
    }
    fn post(&self, _: &mut (), t: Task) {
        self.0.push(t)
    }
    fn poll(&self, empty: &mut u64) -> Option<Task> {
        let t = self.0.pop();
        *empty += u64::from(t.is_none());
        t
    }
    fn consumer_counts(c: &u64) -> (u64, u64) {
        (0, *c)
    }
}

/// Busy work calibrated in nanoseconds (the service time and the arrival gaps).
#[derive(Clone, Copy)]
struct Spinner {
    iters_per_ns: f64,
}

impl Spinner {
    fn calibrate() -> Self {
        let iters = 20_000_000u64;
        let start = Instant::now();
        Self::spin_iters(iters);
        let ns = start.elapsed().as_nanos().max(1) as f64;
        Spinner {
            iters_per_ns: iters as f64 / ns,
        }
    }
    fn spin_iters(n: u64) {
        let mut x = 0u64;
        for i in 0..n {
            x = black_box(x.wrapping_add(i));
        }
        black_box(x);
    }
    fn spin_ns(self, ns: f64) {
        if ns > 0.0 {
            Self::spin_iters((ns * self.iters_per_ns) as u64);
        }
    }
}

/// The measured uncontended cost of one post + one claim on the Atomic set, in ns.
fn queue_op_cost() -> f64 {
    let set: ReadyQueues<Task> = Config::new(2).build().expect("default config is valid");
    let (mut p, mut c) = (set.producer(0), set.consumer(0));
    let t = Task {
        posted_ns: 0,
        producer: 0,
    };
    let mut best = f64::MAX;
    for _ in 0..5 {
        let n = 200_000;
        let start = Instant::now();
        for _ in 0..n {
            set.post(&mut p, t);
            black_box(set.poll(&mut c));
        }
        best = best.min(start.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

#[derive(Clone, Debug, Default)]
struct RunResult {
    delay_us: f64,
    post_rate_per_ms: f64,
    served_per_ms: f64,
    served: Vec<u64>,
    lost: u64,
    overflow: u64,
    empty: u64,
}

#[derive(Clone, Copy)]
struct Params {
    producers: usize,
    consumers: usize,
    service_ns: f64,
    gap_ns: f64,
    /// Gap of the fast producer set in the non-uniform mode.
    fast_gap_ns: f64,
    arrival: Arrival,
    tasks: u64,
    /// Some(w): throughput mode, each producer keeps at most w tasks outstanding.
    window: Option<u64>,
    spinner: Spinner,
}

/// Per-(consumer, producer) completion counters, each on its own cache line and written only
/// by its consumer, so the harness adds no contended read-modify-write per task.
struct Completions {
    producers: usize,
    counters: Vec<CachePadded<AtomicU64>>,
}

impl Completions {
    fn new(consumers: usize, producers: usize) -> Self {
        Self {
            producers,
            counters: (0..consumers * producers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }
    /// Called only by consumer `c`.
    fn record(&self, c: usize, p: usize) {
        let counter = &self.counters[c * self.producers + p];
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Release);
    }
    fn done_for(&self, p: usize) -> u64 {
        self.counters
            .iter()
            .skip(p)
            .step_by(self.producers)
            .map(|c| c.load(Ordering::Acquire))
            .sum()
    }
    fn total(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.load(Ordering::Acquire))
            .sum()
    }
}

fn run_once<S: Structure>(s: &S, prm: &Params) -> RunResult {
    let base = Instant::now();
    let now_ns = || base.elapsed().as_nanos() as u64;
    let per_producer = prm.tasks / prm.producers as u64;
    let total = per_producer * prm.producers as u64;
    let completions = Completions::new(prm.consumers, prm.producers);
    let stop = AtomicBool::new(false);
    let start_flag = AtomicBool::new(false);
    let timestamps = prm.window.is_none();
    std::thread::scope(|scope| {
        let consumers: Vec<_> = (0..prm.consumers)
            .map(|id| {
                let (completions, stop, start_flag) = (&completions, &stop, &start_flag);
                scope.spawn(move || {
                    let mut me = s.consumer(id);
                    let mut served = 0u64;
                    let mut delay = 0u64;
                    while !start_flag.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    while !stop.load(Ordering::Relaxed) {
                        match s.poll(&mut me) {
                            Some(t) => {
                                if timestamps {
                                    delay += now_ns().saturating_sub(t.posted_ns);
                                }
                                prm.spinner.spin_ns(prm.service_ns);
                                served += 1;
                                completions.record(id, t.producer as usize);
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                    (served, delay, S::consumer_counts(&me))
                })
            })
            .collect();
        let producers: Vec<_> = (0..prm.producers)
            .map(|id| {
                let (completions, start_flag) = (&completions, &start_flag);
                scope
                    .spawn(move || produce(s, prm, id, per_producer, completions, start_flag, base))
            })
            .collect();
        let start = Instant::now();
        start_flag.store(true, Ordering::Release);
        let mut producer_time = Duration::ZERO;
        let mut overflow = 0;
        for h in producers {
            let (t, o) = h.join().expect("producer panicked");
            producer_time = producer_time.max(t);
            overflow += o;
        }
        while completions.total() < total {
            std::thread::sleep(Duration::from_micros(20));
        }
        let wall = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        let mut served = Vec::new();
        let (mut lost, mut empty, mut delay_sum) = (0, 0, 0);
        for h in consumers {
            let (n, d, (l, e)) = h.join().expect("consumer panicked");
            served.push(n);
            delay_sum += d;
            lost += l;
            empty += e;
        }
        RunResult {
            delay_us: delay_sum as f64 / total as f64 / 1e3,
            post_rate_per_ms: total as f64 / (producer_time.as_secs_f64() * 1e3),
            served_per_ms: total as f64 / (wall.as_secs_f64() * 1e3),
            served,
            lost,
            overflow,
            empty,
        }
    })
}

/// One producer of [`run_once`]: waits for the start, then posts its tasks on the arrival
/// schedule (or within its window) and returns its posting time and overflow count.
fn produce<S: Structure>(
    s: &S,
    prm: &Params,
    id: usize,
    per_producer: u64,
    completions: &Completions,
    start_flag: &AtomicBool,
    base: Instant,
) -> (Duration, u64) {
    let now_ns = || base.elapsed().as_nanos() as u64;
    let timestamps = prm.window.is_none();
    let mut me = s.producer(id);
    while !start_flag.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let fast = prm.arrival == Arrival::Nonuniform && id % prm.consumers == 0;
    let t0 = Instant::now();
    let mut known_done = 0u64;
    let gap = match prm.arrival {
        Arrival::Uniform => prm.gap_ns,
        Arrival::Nonuniform if fast => prm.fast_gap_ns,
        Arrival::Nonuniform => prm.gap_ns,
        Arrival::Closed => 0.0,
    };
    for k in 0..per_producer {
        if let Some(w) = prm.window {
            while k - known_done >= w {
                known_done = completions.done_for(id);
                if k - known_done >= w {
                    std::thread::yield_now();
                }
            }
        }
        if prm.window.is_none() && gap > 0.0 {
            // Open-loop arrivals on a schedule: the k-th post is due at
            // k * gap. Wait by sleeping/yielding, never by spinning, so the
            // producers leave the CPUs to the consumers (there are more
            // threads than CPUs here).
            let due = t0 + Duration::from_nanos((k as f64 * gap) as u64);
            loop {
                let now = Instant::now();
                if now >= due {
                    break;
                }
                if due - now > Duration::from_micros(200) {
                    std::thread::sleep(due - now - Duration::from_micros(100));
                } else {
                    std::thread::yield_now();
                }
            }
        }
        let posted_ns = if timestamps { now_ns() } else { 0 };
        s.post(
            &mut me,
            Task {
                posted_ns,
                producer: id as u32,
            },
        );
        match prm.arrival {
            _ if prm.window.is_some() => {}
            Arrival::Closed => {
                while completions.done_for(id) <= k {
                    std::thread::yield_now();
                }
            }
            Arrival::Uniform | Arrival::Nonuniform => {}
        }
    }
    (t0.elapsed(), S::producer_overflow(&me))
}

/// The median (partita-stats', the one every table uses) of owned samples.
/// Median over runs of each metric (the split is taken from the run with the median delay).
fn summarize(results: &[RunResult]) -> RunResult {
    let med = |f: fn(&RunResult) -> f64| median(&results.iter().map(f).collect::<Vec<_>>());
    let delay = med(|r| r.delay_us);
    let split_run = results
        .iter()
        .min_by(|a, b| {
            (a.delay_us - delay)
                .abs()
                .total_cmp(&(b.delay_us - delay).abs())
        })
        .cloned()
        .unwrap_or_default();
    RunResult {
        delay_us: delay,
        post_rate_per_ms: med(|r| r.post_rate_per_ms),
        served_per_ms: med(|r| r.served_per_ms),
        served: split_run.served,
        lost: med(|r| r.lost as f64) as u64,
        overflow: med(|r| r.overflow as f64) as u64,
        empty: med(|r| r.empty as f64) as u64,
    }
}

/// What a table row runs on.
#[derive(Clone, Copy)]
enum Row {
    Pair(DequeuePolicy, EnqueuePolicy, LockMode, bool),
    Injector,
    SegQueue,
}

impl Row {
    fn labels(self) -> (String, String) {
        match self {
            Row::Pair(d, e, m, bidi) => {
                let mut dl = d.name().to_string();
                if d.is_multi_access() && m == LockMode::Paper {
                    dl.push_str(" [paper locks]");
                }
                if !bidi {
                    dl.push_str(" [one-way]");
                }
                (dl, e.name().to_string())
            }
            Row::Injector => ("crossbeam Injector".into(), "-".into()),
            Row::SegQueue => ("crossbeam SegQueue".into(), "-".into()),
        }
    }
}

/// One run of one row; `None` if the row's configuration is invalid (reported once).
fn run_row_once(row: Row, args: &Args, prm: &Params) -> Option<RunResult> {
    match row {
        Row::Pair(d, e, mode, bidi) => {
            let config = match d {
                DequeuePolicy::Global => Config::global_fifo(prm.consumers),
                _ => Config::new(prm.consumers)
                    .dequeue(d)
                    .enqueue(e)
                    .lock_mode(mode)
                    .slots(args.slots)
                    .bidirectional(bidi)
                    .cutoff(prm.producers.clamp(1, args.slots)),
            }
            .seed(args.seed);
            match config.build::<Task>() {
                Ok(set) => Some(run_once(&set, prm)),
                Err(err) => {
                    eprintln!("skipping {}:{}: {err}", d.name(), e.name());
                    None
                }
            }
        }
        Row::Injector => Some(run_once(&CbInjector(Injector::new()), prm)),
        Row::SegQueue => Some(run_once(&CbSegQueue(SegQueue::new()), prm)),
    }
}

/// Runs every row `args.runs` times, round-robin (run 1 of every row, then run 2, ...), so
/// slow drifts of the shared machine hit every row alike; returns the per-row medians.
fn measure(rows: &[Row], args: &Args, prm: &Params) -> Vec<RunResult> {
    let mut results: Vec<Vec<RunResult>> = vec![Vec::new(); rows.len()];
    let mut valid = vec![true; rows.len()];
    for _ in 0..args.runs {
        for (i, &row) in rows.iter().enumerate() {
            if !valid[i] {
                continue;
            }
            match run_row_once(row, args, prm) {
                Some(r) => results[i].push(r),
                None => valid[i] = false, // reported once by run_row_once
            }
        }
    }
    results.iter().map(|r| summarize(r)).collect()
}

fn header(throughput: bool) {
    if throughput {
        println!(
            "| structure | policy pair | tasks/ms (median) | vs GlobalFifo | vs Injector | lost races | overflow posts | empty polls |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|");
    } else {
        println!(
            "| dequeue | enqueue | delay (µs/task) | post rate (tasks/ms) | load split (pp off even) | lost races | overflow posts | empty polls |"
        );
        println!("|---|---|---:|---:|---|---:|---:|---:|");
    }
}

fn print_row(row: Row, r: &RunResult) {
    let (d, e) = row.labels();
    let split: Vec<String> = load_split(&r.served)
        .iter()
        .map(|x| format!("{x:+.1}"))
        .collect();
    println!(
        "| {d} | {e} | {:.2} | {:.1} | {} | {} | {} | {} |",
        r.delay_us,
        r.post_rate_per_ms,
        split.join(" "),
        r.lost,
        r.overflow,
        r.empty
    );
}

fn params(
    args: &Args,
    op_ns: f64,
    spinner: Spinner,
    service_mult: f64,
    arrival: Arrival,
) -> Params {
    let service_ns = service_mult * op_ns;
    let mut prm = Params {
        producers: args.producers.max(1),
        consumers: args.consumers.max(1),
        service_ns,
        gap_ns: 0.0,
        fast_gap_ns: 0.0,
        arrival,
        tasks: args.tasks,
        window: None,
        spinner,
    };
    if matches!(arrival, Arrival::Uniform | Arrival::Nonuniform) {
        // Offered load relative to the *measured* capacity of this thread layout (with more
        // threads than CPUs, time slicing, not the queue operation, bounds the service rate):
        // saturate the Global FIFO with a window of outstanding tasks and time it.
        let mut cal = Params {
            window: Some(32),
            arrival: Arrival::Uniform,
            ..prm
        };
        cal.tasks = args.tasks.min(50_000);
        let capacity_per_ns = median(
            &(0..3)
                .map(|_| {
                    let set = Config::global_fifo(cal.consumers)
                        .build::<Task>()
                        .expect("Global:Global is valid");
                    run_once(&set, &cal).served_per_ms / 1e6
                })
                .collect::<Vec<_>>(),
        );
        let rate = args.load.max(0.01) * capacity_per_ns; // tasks per ns, all producers
        let p = prm.producers as f64;
        let (gap, fast_gap) = match arrival {
            Arrival::Nonuniform => {
                let fast = (0..prm.producers)
                    .filter(|id| id % prm.consumers == 0)
                    .count() as f64;
                let f = args.fast_factor.max(1.0);
                let slow_rate = rate / ((p - fast) + f * fast);
                (1.0 / slow_rate, 1.0 / (slow_rate * f))
            }
            _ => (p / rate, p / rate),
        };
        prm.gap_ns = gap;
        prm.fast_gap_ns = fast_gap;
        println!(
            "(offered load {:.2} of the measured capacity {:.0} tasks/ms: gap {:.0} ns{})",
            args.load,
            capacity_per_ns * 1e6,
            gap,
            if arrival == Arrival::Nonuniform {
                format!(", fast set {fast_gap:.0} ns")
            } else {
                String::new()
            }
        );
        println!();
    }
    prm
}

fn matrix_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for d in DequeuePolicy::MULTI_ACCESS {
        for e in EnqueuePolicy::MULTI_ACCESS {
            rows.push(Row::Pair(d, e, LockMode::Atomic, true));
        }
    }
    rows.extend(baseline_rows());
    rows
}

fn baseline_rows() -> Vec<Row> {
    vec![
        Row::Pair(
            DequeuePolicy::Global,
            EnqueuePolicy::Global,
            LockMode::Atomic,
            true,
        ),
        Row::Pair(
            DequeuePolicy::DistributedFcfs,
            EnqueuePolicy::StaticFcfs,
            LockMode::Atomic,
            true,
        ),
        Row::Pair(
            DequeuePolicy::DistributedFcfs,
            EnqueuePolicy::RandomFcfs,
            LockMode::Atomic,
            true,
        ),
        Row::Injector,
        Row::SegQueue,
    ]
}

fn table(rows: &[Row], args: &Args, prm: &Params) {
    let results = measure(rows, args, prm);
    header(false);
    for (&row, r) in rows.iter().zip(&results) {
        print_row(row, r);
    }
    println!();
}

fn main() {
    let args = Args::parse();
    if args.consumers == 0 || args.producers == 0 || args.tasks == 0 || args.runs == 0 {
        eprintln!("error: --producers, --consumers, --tasks and --runs must be at least 1");
        std::process::exit(2);
    }
    let spinner = Spinner::calibrate();
    let op_ns = queue_op_cost();
    println!(
        "# {:?}: {} producers, {} consumers, {} tasks/run, median of {} runs; queue-operation cost (uncontended post+claim, Atomic set) = {:.1} ns",
        args.experiment, args.producers, args.consumers, args.tasks, args.runs, op_ns
    );
    println!();
    let seq_prand = Row::Pair(
        DequeuePolicy::Sequential,
        EnqueuePolicy::PrimaryRandom,
        LockMode::Atomic,
        true,
    );
    match args.experiment {
        Experiment::Matrix => {
            println!(
                "## Policy matrix (E3): service {}× op cost, arrival {:?}, load {}",
                args.service, args.arrival, args.load
            );
            println!();
            let prm = params(&args, op_ns, spinner, args.service, args.arrival);
            table(&matrix_rows(), &args, &prm);
        }
        Experiment::E1 => experiment_e1(&args, op_ns, spinner, seq_prand),
        Experiment::E2 => experiment_e2(&args, op_ns, spinner),
        Experiment::E4 => experiment_e4(&args, op_ns, spinner, seq_prand),
        Experiment::E7 => experiment_e7(&args, op_ns, spinner),
        Experiment::E9 => experiment_e9(&args, op_ns, spinner),
        Experiment::Throughput => experiment_throughput(&args, op_ns, spinner, seq_prand),
    }
}

/// E1: the global queue against distributed ones, under each arrival process.
fn experiment_e1(args: &Args, op_ns: f64, spinner: Spinner, seq_prand: Row) {
    for arrival in [Arrival::Closed, Arrival::Uniform, Arrival::Nonuniform] {
        println!(
            "## E1 global vs distributed: arrival {arrival:?}, service {}×",
            args.service
        );
        println!();
        let prm = params(args, op_ns, spinner, args.service, arrival);
        let mut rows = vec![
            seq_prand,
            Row::Pair(
                DequeuePolicy::Sequential,
                EnqueuePolicy::PrimaryRandom,
                LockMode::Paper,
                true,
            ),
        ];
        rows.extend(baseline_rows());
        table(&rows, args, &prm);
    }
}

/// E2: Static:Static against the alternatives under non-uniform load.
fn experiment_e2(args: &Args, op_ns: f64, spinner: Spinner) {
    println!(
        "## E2 Static:Static under non-uniform load (paper: 40/30/30 with 3 consumers, the worst delay), service {}×",
        args.service
    );
    println!();
    let prm = params(args, op_ns, spinner, args.service, Arrival::Nonuniform);
    let rows: Vec<Row> = [
        (DequeuePolicy::Static, EnqueuePolicy::Static),
        (DequeuePolicy::Static, EnqueuePolicy::Random),
        (DequeuePolicy::Sequential, EnqueuePolicy::Static),
        (DequeuePolicy::Sequential, EnqueuePolicy::PrimaryRandom),
        (DequeuePolicy::PrimaryFixed, EnqueuePolicy::PrimaryFixed),
    ]
    .into_iter()
    .map(|(d, e)| Row::Pair(d, e, LockMode::Atomic, true))
    .collect();
    table(&rows, args, &prm);
}

/// E4: the policies as the service time grows relative to a queue operation.
fn experiment_e4(args: &Args, op_ns: f64, spinner: Spinner, seq_prand: Row) {
    for mult in [0.0, 1.0, 2.0, 5.0, 20.0] {
        println!("## E4 service {mult}× op cost, arrival {:?}", args.arrival);
        println!();
        let prm = params(args, op_ns, spinner, mult, args.arrival);
        let rows = vec![
            seq_prand,
            Row::Pair(
                DequeuePolicy::DistributedFcfs,
                EnqueuePolicy::RandomFcfs,
                LockMode::Atomic,
                true,
            ),
            Row::Pair(
                DequeuePolicy::DistributedFcfs,
                EnqueuePolicy::StaticFcfs,
                LockMode::Atomic,
                true,
            ),
            Row::Injector,
            Row::SegQueue,
        ];
        table(&rows, args, &prm);
    }
}

/// E7: bidirectional against one-way scanning, per lock mode.
fn experiment_e7(args: &Args, op_ns: f64, spinner: Spinner) {
    println!(
        "## E7 bidirectional vs one-way scan: service {}×, arrival {:?}",
        args.service, args.arrival
    );
    println!();
    let prm = params(args, op_ns, spinner, args.service, args.arrival);
    let mut rows = Vec::new();
    for (d, e) in [
        (DequeuePolicy::Sequential, EnqueuePolicy::PrimaryRandom),
        (
            DequeuePolicy::PrimarySequential,
            EnqueuePolicy::PrimaryRandom,
        ),
        (DequeuePolicy::PrimaryFixed, EnqueuePolicy::Static),
        (DequeuePolicy::PrimaryRandom, EnqueuePolicy::PrimaryFixed),
    ] {
        for mode in [LockMode::Atomic, LockMode::Paper] {
            rows.push(Row::Pair(d, e, mode, true));
            rows.push(Row::Pair(d, e, mode, false));
        }
    }
    table(&rows, args, &prm);
}

/// E9: Random and Primary/Random dequeue with each enqueue policy.
fn experiment_e9(args: &Args, op_ns: f64, spinner: Spinner) {
    println!(
        "## E9 Random vs Primary/Random dequeue (xorshift RNG): service {}×, arrival {:?}",
        args.service, args.arrival
    );
    println!();
    let prm = params(args, op_ns, spinner, args.service, args.arrival);
    let mut rows = Vec::new();
    for e in [
        EnqueuePolicy::Random,
        EnqueuePolicy::PrimaryRandom,
        EnqueuePolicy::Sequential,
    ] {
        rows.push(Row::Pair(DequeuePolicy::Random, e, LockMode::Atomic, true));
        rows.push(Row::Pair(
            DequeuePolicy::PrimaryRandom,
            e,
            LockMode::Atomic,
            true,
        ));
    }
    table(&rows, args, &prm);
}

/// Task throughput against the global FIFO and crossbeam's queues, as ratios.
fn experiment_throughput(args: &Args, op_ns: f64, spinner: Spinner, seq_prand: Row) {
    println!(
        "## Task throughput: producers post as fast as a window of {} outstanding tasks each allows; service {}×",
        args.window, args.service
    );
    println!();
    let mut prm = params(args, op_ns, spinner, args.service, Arrival::Closed);
    prm.window = Some(args.window);
    // Static:Static is the structure with no policy search (valid for any N); the
    // paper's recommended Sequential:Primary/Random needs N >= 2.
    let stat = |mode| Row::Pair(DequeuePolicy::Static, EnqueuePolicy::Static, mode, true);
    let mut rows = vec![("multi-access Atomic", stat(LockMode::Atomic))];
    if args.consumers >= 2 {
        rows.push(("multi-access Atomic", seq_prand));
    }
    rows.extend([
        ("multi-access Paper", stat(LockMode::Paper)),
        (
            "DistributedFifo",
            Row::Pair(
                DequeuePolicy::DistributedFcfs,
                EnqueuePolicy::StaticFcfs,
                LockMode::Atomic,
                true,
            ),
        ),
        (
            "GlobalFifo",
            Row::Pair(
                DequeuePolicy::Global,
                EnqueuePolicy::Global,
                LockMode::Atomic,
                true,
            ),
        ),
        ("crossbeam Injector", Row::Injector),
        ("crossbeam SegQueue", Row::SegQueue),
    ]);
    let plain: Vec<Row> = rows.iter().map(|&(_, row)| row).collect();
    let measured = measure(&plain, args, &prm);
    let results: Vec<(&str, Row, RunResult)> = rows
        .into_iter()
        .zip(measured)
        .map(|((name, row), r)| (name, row, r))
        .collect();
    let rate_of = |name: &str| {
        results
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or(f64::NAN, |(_, _, r)| r.served_per_ms)
    };
    let (global, injector) = (rate_of("GlobalFifo"), rate_of("crossbeam Injector"));
    header(true);
    for (name, row, r) in &results {
        let (d, e) = row.labels();
        println!(
            "| {name} | {d} : {e} | {:.0} | {:.2}× | {:.2}× | {} | {} | {} |",
            r.served_per_ms,
            r.served_per_ms / global,
            r.served_per_ms / injector,
            r.lost,
            r.overflow,
            r.empty
        );
    }
    println!();
}

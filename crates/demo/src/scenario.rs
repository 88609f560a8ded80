//! The demo's additional experiments (`partita demo --scenario NAME`), each run uncontrolled
//! and under process control (or in the modes given with `--modes`):
//!
//! - `staggered`: the mix's applications arrive one every `--stagger` seconds (Tucker Fig. 7.6:
//!   workers over time);
//! - `hog`: an uncontrolled CPU-bound process beside controlled applications: the CPU share of
//!   each while all run (Tucker Fig. 7.3, fairness);
//! - `sleeper`: a process sleeping 5 ms at a time measures how late it wakes beside parallel
//!   jobs (Tucker §7.2, response time);
//! - `three`: three identical applications on two CPUs: long-run CPU shares (rotation).

use super::mode::{Mode, ModeRun};
use super::report::summarize;
use super::{label, mix, parse_modes, run_modes, setup, BoxError, DemoArgs};
use crate::references::references;
use crate::workload::workload_params;
use partita_stats::median;
use partita_workloads::App;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// CPU shares over the interval in which all applications were running.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalShares {
    /// Start of the interval, s.
    pub from_s: f64,
    /// End of the interval, s.
    pub to_s: f64,
    /// `(label, CPU seconds / (interval × CPUs))` in the order asked.
    pub shares: Vec<(String, f64)>,
}

/// CPU share of each application over the interval in which all of them were running. `None` when they never all
/// ran together for two samples.
///
/// ```
/// use partita_demo::{mode::{AppSample, Sample}, Mode, ModeRun};
/// let smp = |t_s: f64, a: f64, b: f64| Sample { t_s, apps: vec![
///     AppSample { label: "a".into(), cpu_s: a, runnable: 1, target: None, active: None, cpus: None, shared: false },
///     AppSample { label: "b".into(), cpu_s: b, runnable: 1, target: None, active: None, cpus: None, shared: false },
/// ]};
/// let run = ModeRun { mode: Mode::Uncontrolled, makespan_s: 2.0, cpus: 2, realloc_ms: 0,
///     apps: vec![], timeline: vec![smp(0.0, 0.0, 0.0), smp(1.0, 1.5, 0.5)] };
/// let s = partita_demo::scenario::interval_shares(&run, &["a", "b"]).unwrap();
/// assert_eq!(s.shares, vec![("a".to_string(), 0.75), ("b".to_string(), 0.25)]);
/// ```
pub fn interval_shares(run: &ModeRun, labels: &[&str]) -> Option<IntervalShares> {
    let all =
        |s: &&super::mode::Sample| labels.iter().all(|l| s.apps.iter().any(|a| a.label == *l));
    let first = run.timeline.iter().find(all)?;
    let last = run.timeline.iter().rev().find(all)?;
    let dt = last.t_s - first.t_s;
    if dt <= 0.0 {
        return None;
    }
    let cpu = |s: &super::mode::Sample, l: &str| {
        s.apps
            .iter()
            .find(|a| a.label == l)
            .map_or(0.0, |a| a.cpu_s)
    };
    let shares = labels
        .iter()
        .map(|l| {
            let used = cpu(last, l) - cpu(first, l);
            (l.to_string(), used / (dt * run.cpus.max(1) as f64))
        })
        .collect();
    Some(IntervalShares {
        from_s: first.t_s,
        to_s: last.t_s,
        shares,
    })
}

/// Largest relative deviation of `shares` from their mean (0.1 = 10%).
///
/// ```
/// assert!((partita_demo::scenario::max_deviation(&[0.3, 0.3, 0.4]) - 0.2).abs() < 1e-9);
/// ```
pub fn max_deviation(shares: &[f64]) -> f64 {
    let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    if mean <= 0.0 {
        return 0.0;
    }
    shares
        .iter()
        .map(|s| (s / mean - 1.0).abs())
        .fold(0.0, f64::max)
}

/// Run scenario `name`.
pub fn run(name: &str, args: &DemoArgs) -> Result<(), BoxError> {
    let user_apps: Vec<App> = args
        .apps
        .iter()
        .map(|a| a.parse::<App>())
        .collect::<Result<_, _>>()?;
    let or = |default: Vec<App>| {
        if user_apps.is_empty() {
            default
        } else {
            user_apps.clone()
        }
    };
    let mut scale = args.scale;
    let mut helper_s = 0.0;
    let apps: Vec<App> = match name {
        "staggered" => or(mix(&args.mix)?),
        "hog" => {
            helper_s = 1.5 * args.scale;
            let mut v = vec![App::Hog];
            v.extend(or(vec![App::Ocean, App::Water]));
            v
        }
        "sleeper" => {
            helper_s = 1.5 * args.scale;
            let mut v = vec![App::Sleeper];
            v.extend(or(vec![App::Ocean, App::Mp3d, App::Ocean]));
            v
        }
        "three" => {
            // Long enough for many reallocation periods.
            scale *= 4.0;
            or(vec![App::Ocean, App::Ocean, App::Ocean])
        }
        other => {
            return Err(format!(
                "unknown --scenario `{other}` (expected staggered, hog, sleeper or three)"
            )
            .into())
        }
    };
    let modes = if args.modes.is_empty() {
        vec![Mode::Uncontrolled, Mode::ProcessControl]
    } else {
        parse_modes(&args.modes)?
    };
    let mut s = setup(args, modes.len() * args.repeat)?;
    s.params.scale = scale;
    s.params.helper_s = helper_s;
    let mut specs = label(&apps);
    if name == "staggered" {
        for (i, sp) in specs.iter_mut().enumerate() {
            sp.start_after = Duration::from_secs_f64(args.stagger * i as f64);
        }
    }
    let wp = workload_params(Some(s.params.threads), scale, args.spin_us, helper_s)?;
    let expected = references(&apps, &wp, &s.params.exe, &s.out, &s.pb)?;
    let started = Instant::now();
    let runs = run_modes(&modes, &specs, &expected, &s, args.repeat)?;
    s.pb.finish_and_clear();
    let labels: Vec<&str> = specs.iter().map(|s| s.label.as_str()).collect();
    let extra = match name {
        "sleeper" => sleeper_table(&runs),
        "hog" | "three" => shares_table(&runs, &labels),
        _ => String::new(),
    };
    let title = format!(
        "scenario {name}: {} on {} CPUs, scale {scale}",
        labels.join(", "),
        runs.first().map_or(0, |r| r.cpus)
    );
    let summaries = summarize(&runs);
    print!("{}", super::report::to_text(&summaries));
    println!("\n{extra}");
    let written =
        crate::output::write_outputs(&s, &title, &runs, &summaries, &extra, started.elapsed())?;
    println!("wrote {written}");
    super::check_results(&runs)
}

fn shares_table(runs: &[ModeRun], labels: &[&str]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## CPU share while all applications ran (median over runs)\n"
    );
    let _ = writeln!(
        md,
        "| mode | interval (s) | {} | max deviation from equal |",
        labels.join(" | ")
    );
    let _ = writeln!(md, "|---|---:|{}---:|", "---:|".repeat(labels.len()));
    for m in [Mode::Uncontrolled, Mode::ProcessControl] {
        let per: Vec<_> = runs
            .iter()
            .filter(|r| r.mode == m)
            .filter_map(|r| interval_shares(r, labels))
            .collect();
        if per.is_empty() {
            continue;
        }
        let interval = median(&per.iter().map(|p| p.to_s - p.from_s).collect::<Vec<_>>());
        let shares: Vec<f64> = (0..labels.len())
            .map(|i| median(&per.iter().map(|p| p.shares[i].1).collect::<Vec<_>>()))
            .collect();
        let dev = median(
            &per.iter()
                .map(|p| max_deviation(&p.shares.iter().map(|x| x.1).collect::<Vec<_>>()))
                .collect::<Vec<_>>(),
        );
        let _ = writeln!(
            md,
            "| {m} | {interval:.2} | {} | {:.1}% |",
            shares
                .iter()
                .map(|s| format!("{:.1}%", s * 100.0))
                .collect::<Vec<_>>()
                .join(" | "),
            dev * 100.0
        );
    }
    md
}

fn sleeper_table(runs: &[ModeRun]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Sleeper wake-up lateness beside the parallel jobs (median over runs)\n"
    );
    let _ = writeln!(md, "| mode | wake-ups | p50 (µs) | p99 (µs) | max (µs) |");
    let _ = writeln!(md, "|---|---:|---:|---:|---:|");
    for m in [Mode::Uncontrolled, Mode::ProcessControl] {
        let sl: Vec<_> = runs
            .iter()
            .filter(|r| r.mode == m)
            .filter_map(|r| r.apps.iter().find(|a| a.app == "sleeper"))
            .collect();
        if sl.is_empty() {
            continue;
        }
        let q = |k: &str| {
            median(
                &sl.iter()
                    .filter_map(|a| a.metrics.get(k).copied())
                    .collect::<Vec<_>>(),
            )
        };
        let _ = writeln!(
            md,
            "| {m} | {:.0} | {:.0} | {:.0} | {:.0} |",
            q("wakeups"),
            q("wake_p50_us"),
            q("wake_p99_us"),
            q("wake_max_us")
        );
    }
    md
}

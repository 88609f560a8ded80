//! # partita-sim
//!
//! `partita simulate`: models, not measurements.
//!
//! - [`cosched`]: Antonopoulos et al.'s bus-bandwidth experiments on the slowdown model of
//!   [`model`] — Fig. 1 (an application alone, paired, beside BBMA or nBBMA) and Fig. 2
//!   (Latest Quantum and Quanta Window against plain time-sharing on the three workload sets),
//!   the bandwidth policy being partita-manager's own per-quantum schedule;
//! - [`policies`]: the allocation policies (equipartition, usage-decay, DSS, batch) over time
//!   on a scripted scenario, through partita-manager's pure allocator;
//! - `numa`: partita-numa's migrate/replicate simulator (its Table 10 and Fig. 23 shapes).
//!
//! Each prints tables and writes SVG charts. The CLI wires [`SimulateArgs`] and [`run`].

#![warn(missing_docs)]

pub mod cosched;
pub mod model;
pub mod policies;
pub mod svg;
pub mod workload;

use cosched::{fig1, turnaround, Coupling, RunConfig, Scheduler};
use partita_manager::config::PolicyKind;
use std::fmt::Write as _;
use std::path::PathBuf;
use workload::{WorkloadSet, APPS};

/// What to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Model {
    /// Fig. 1 and Fig. 2 of the bandwidth paper.
    Bandwidth,
    /// The allocation policies over time.
    Policies,
    /// partita-numa's trace-driven migrate/replicate simulator (4 nodes, short traces).
    Numa,
    /// Bandwidth and policies.
    All,
}

/// `partita simulate` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateArgs {
    /// Which model to run.
    #[arg(value_enum, default_value = "all")]
    pub model: Model,
    /// Directory for the SVG charts (created); none written when absent.
    #[arg(long)]
    pub svg_dir: Option<PathBuf>,
    /// Seeds averaged per Fig. 2 cell (the OS's random choices and the bursts).
    #[arg(long, default_value_t = 5)]
    pub seeds: u64,
    /// Work of each application instance, seconds of unloaded execution.
    #[arg(long, default_value_t = 20.0)]
    pub work_s: f64,
}

impl Default for SimulateArgs {
    fn default() -> Self {
        SimulateArgs {
            model: Model::All,
            svg_dir: None,
            seeds: 5,
            work_s: 20.0,
        }
    }
}

/// Errors of `partita simulate`.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A chart could not be written.
    #[error("write {path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// An argument out of range.
    #[error("invalid argument --{name} = {value}: {reason}")]
    Invalid {
        /// Argument.
        name: &'static str,
        /// Value.
        value: String,
        /// Why.
        reason: &'static str,
    },
}

/// Fig. 2 for one workload set: per application, improvement (%) of mean turnaround over
/// time-sharing for Latest Quantum and Quanta Window.
#[derive(Debug, Clone, PartialEq)]
pub struct Fig2Set {
    /// The set.
    pub set: WorkloadSet,
    /// How the applications' threads wait for each other in this run.
    pub coupling: Coupling,
    /// `(application, LQ %, QW %)`.
    pub rows: Vec<(&'static str, f64, f64)>,
}

impl Fig2Set {
    /// Mean improvements `(LQ, QW)`.
    pub fn means(&self) -> (f64, f64) {
        let n = self.rows.len().max(1) as f64;
        (
            self.rows.iter().map(|r| r.1).sum::<f64>() / n,
            self.rows.iter().map(|r| r.2).sum::<f64>() / n,
        )
    }
}

/// Everything `run` computed (also printed).
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    /// Fig. 1 rows.
    pub fig1: Vec<cosched::Fig1Row>,
    /// Fig. 2, one entry per set and coupling.
    pub fig2: Vec<Fig2Set>,
    /// The printed text.
    pub text: String,
}

/// Fig. 2 for one set, averaged over `seeds`.
///
/// ```
/// use partita_sim::{cosched::Coupling, fig2, workload::WorkloadSet};
/// let f = fig2(WorkloadSet::B, 1, 2.0, Coupling::Yield);
/// assert_eq!(f.rows.len(), 11);
/// ```
pub fn fig2(set: WorkloadSet, seeds: u64, work_s: f64, coupling: Coupling) -> Fig2Set {
    let rows = APPS
        .iter()
        .map(|app| {
            let mean = |s: Scheduler| {
                (1..=seeds)
                    .map(|seed| {
                        let c = RunConfig {
                            seed,
                            work_s,
                            coupling,
                            ..RunConfig::default()
                        };
                        turnaround(app, set, s, &c)
                    })
                    .sum::<f64>()
                    / seeds as f64
            };
            let ts = mean(Scheduler::TimeSharing);
            let lq = mean(Scheduler::LatestQuantum);
            let qw = mean(Scheduler::QuantaWindow);
            (app.name, 100.0 * (ts - lq) / ts, 100.0 * (ts - qw) / ts)
        })
        .collect();
    Fig2Set {
        set,
        coupling,
        rows,
    }
}

fn write_svg(dir: &Option<PathBuf>, name: &str, svg: String) -> Result<(), SimError> {
    let Some(dir) = dir else { return Ok(()) };
    let io = |path: PathBuf| move |source| SimError::Io { path, source };
    std::fs::create_dir_all(dir).map_err(io(dir.clone()))?;
    let path = dir.join(name);
    std::fs::write(&path, svg).map_err(io(path.clone()))
}

/// Fig. 1 (bus rate and slowdown per application) and Fig. 2, as text and SVG.
fn bandwidth(args: &SimulateArgs, r: &mut SimReport) -> Result<(), SimError> {
    let t = &mut r.text;
    let _ = writeln!(
        t,
        "Fig. 1 (model): bus rate (tx/us) and slowdown of a 2-thread application"
    );
    let _ = writeln!(
        t,
        "{:<11} {:>6} {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6}",
        "app", "solo", "pair", "+BBMA", "+nBBMA", "pair", "+BBMA", "+nBBMA"
    );
    for app in &APPS {
        let row = fig1(app);
        let [a, b, c, d] = row.rates;
        let _ = writeln!(
            t,
            "{:<11} {a:>6.2} {b:>6.2} {c:>6.2} {d:>6.2} | {:>6.2} {:>6.2} {:>6.2}",
            row.name, row.slowdown_pair, row.slowdown_bbma, row.slowdown_nbbma
        );
        r.fig1.push(row);
    }
    let labels: Vec<String> = r.fig1.iter().map(|f| f.name.to_string()).collect();
    let slow = |f: fn(&cosched::Fig1Row) -> f64| r.fig1.iter().map(f).collect::<Vec<f64>>();
    write_svg(
        &args.svg_dir,
        "fig1-slowdown.svg",
        svg::bars(
            "Fig. 1B (model): slowdown",
            &labels,
            &[
                ("solo".into(), vec![1.0; labels.len()]),
                ("pair".into(), slow(|f| f.slowdown_pair)),
                ("+2 BBMA".into(), slow(|f| f.slowdown_bbma)),
                ("+2 nBBMA".into(), slow(|f| f.slowdown_nbbma)),
            ],
            "x",
        ),
    )?;
    bandwidth_fig2(args, r, &labels)
}

/// Fig. 2: each workload set's improvement of mean turnaround over time-sharing, for both
/// couplings (the model's one assumption the paper does not settle, see [`Coupling`]).
fn bandwidth_fig2(
    args: &SimulateArgs,
    r: &mut SimReport,
    labels: &[String],
) -> Result<(), SimError> {
    let t = &mut r.text;
    let couplings = [Coupling::Barrier, Coupling::Yield];
    let mut all: Vec<Fig2Set> = Vec::new();
    for set in WorkloadSet::ALL {
        let per: Vec<Fig2Set> = couplings
            .iter()
            .map(|&c| fig2(set, args.seeds, args.work_s, c))
            .collect();
        let _ = writeln!(
            t,
            "\nFig. 2 set {}: improvement of mean turnaround over time-sharing (%)",
            set.label()
        );
        let _ = writeln!(
            t,
            "{:<11} {:>8} {:>8} | {:>8} {:>8}",
            "coupling", "barrier", "", "yield", ""
        );
        let _ = writeln!(
            t,
            "{:<11} {:>8} {:>8} | {:>8} {:>8}",
            "app", "LQ", "QW", "LQ", "QW"
        );
        for (k, (name, lq, qw)) in per[0].rows.iter().enumerate() {
            let (_, ylq, yqw) = per[1].rows[k];
            let _ = writeln!(t, "{name:<11} {lq:>8.1} {qw:>8.1} | {ylq:>8.1} {yqw:>8.1}");
        }
        let ((lq, qw), (ylq, yqw)) = (per[0].means(), per[1].means());
        let _ = writeln!(
            t,
            "{:<11} {lq:>8.1} {qw:>8.1} | {ylq:>8.1} {yqw:>8.1}",
            "mean"
        );
        for f in &per {
            write_svg(
                &args.svg_dir,
                &format!("fig2-set-{:?}-{:?}.svg", set, f.coupling).to_lowercase(),
                svg::bars(
                    &format!(
                        "Fig. 2 set {} (model, {:?} coupling): improvement over time-sharing",
                        set.label(),
                        f.coupling
                    ),
                    labels,
                    &[
                        (
                            "Latest Quantum".into(),
                            f.rows.iter().map(|r| r.1).collect(),
                        ),
                        ("Quanta Window".into(), f.rows.iter().map(|r| r.2).collect()),
                    ],
                    "%",
                ),
            )?;
        }
        all.extend(per);
    }
    for c in couplings {
        let sets: Vec<&Fig2Set> = all.iter().filter(|f| f.coupling == c).collect();
        let n = sets.len() as f64;
        let lq = sets.iter().map(|f| f.means().0).sum::<f64>() / n;
        let qw = sets.iter().map(|f| f.means().1).sum::<f64>() / n;
        let _ = writeln!(
            t,
            "mean over the three sets, {c:?} coupling: LQ {lq:.1}%  QW {qw:.1}%"
        );
    }
    let _ = writeln!(
        t,
        "(paper: set A 41% / 31%, set B 13% / 21%, set C 26% / 25%; 26% both over all sets)"
    );
    r.fig2 = all;
    Ok(())
}

fn policies(args: &SimulateArgs, r: &mut SimReport) -> Result<(), SimError> {
    let t = &mut r.text;
    let _ = writeln!(t, "\nAllocation policies over time: 8 CPUs; A wants 8; B (pool 4) from 5 s, 1 from 20 s; C (6) 10-25 s; D (2) from 12 s");
    for policy in [
        PolicyKind::Equipartition,
        PolicyKind::UsageDecay,
        PolicyKind::Dss,
        PolicyKind::Batch,
    ] {
        let (times, per_app) = policies::over_time(policy, 300);
        let _ = writeln!(t, "{policy}: CPUs of A B C D at");
        for (k, time) in times.iter().enumerate().filter(|(k, _)| k % 10 == 0) {
            let v: Vec<String> = per_app.iter().map(|a| a[k].to_string()).collect();
            let _ = writeln!(t, "  {time:>5.1} s  {}", v.join(" "));
        }
        let series: Vec<(String, Vec<f64>)> = ["A", "B", "C", "D"]
            .iter()
            .zip(&per_app)
            .map(|(n, v)| (n.to_string(), v.iter().map(|&x| x as f64).collect()))
            .collect();
        write_svg(
            &args.svg_dir,
            &format!("policy-{policy}.svg"),
            svg::steps(&format!("{policy}: CPUs per application"), &times, &series),
        )?;
    }
    Ok(())
}

/// Run `partita simulate`: compute, print the tables to stdout, write the SVGs.
///
/// ```
/// let args = partita_sim::SimulateArgs { model: partita_sim::Model::Policies, ..Default::default() };
/// let r = partita_sim::run(&args).unwrap();
/// assert!(r.text.contains("equipartition"));
/// ```
pub fn run(args: &SimulateArgs) -> Result<SimReport, SimError> {
    if args.seeds == 0 {
        return Err(SimError::Invalid {
            name: "seeds",
            value: "0".into(),
            reason: "must be at least 1",
        });
    }
    if !(args.work_s.is_finite() && args.work_s > 0.0) {
        return Err(SimError::Invalid {
            name: "work-s",
            value: args.work_s.to_string(),
            reason: "must be a positive number",
        });
    }
    let mut r = SimReport::default();
    if matches!(args.model, Model::Bandwidth | Model::All) {
        bandwidth(args, &mut r)?;
    }
    if matches!(args.model, Model::Policies | Model::All) {
        policies(args, &mut r)?;
    }
    if args.model == Model::Numa {
        use partita_numa::sim::{
            format_decisions, format_table, run_table, SimConfig, TraceConfig,
        };
        let rows = run_table(&TraceConfig::small(), &SimConfig::default());
        let _ = writeln!(
            r.text,
            "NUMA migrate/replicate (4 nodes, short traces): per workload and policy"
        );
        r.text += &format_table(&rows);
        let _ = writeln!(r.text, "\nOutcome of hot-page decisions under Mig/Rep");
        r.text += &format_decisions(&rows);
    }
    print!("{}", r.text);
    Ok(r)
}

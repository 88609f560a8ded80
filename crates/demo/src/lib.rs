//! # partita-demo
//!
//! `partita demo`: the multiprogrammed workload run in each mode (uncontrolled, partitioned,
//! process control, batch) with a report — Tucker 1993 ch. 7 and the NANOS paper's Figs. 2–4
//! on this machine — and the programs it runs: the hidden `partita workload` (one application
//! of the mix) and `partita probe` (a small pool registered with a manager, for tests and
//! benchmarks). The `partita` binary (root package) parses the command line and calls
//! [`run`], [`workload::run_workload`] and [`probe::run`].
//!
//! The demo needs nothing but the repository: it starts its own manager in-process on a
//! private socket, runs every application of the mix as a separate process (`partita
//! workload NAME …`, the hidden subcommand), samples `/proc` and the manager's status while
//! they run, and reaps each with `wait4` for its exact CPU time and context switches. Every
//! application checks its result against a sequential reference computed (and cached) before
//! the modes run.
//!
//! Module map: [`mode`] (running one mix in one mode), [`procfs`] and [`reap`] (what the
//! processes did), [`report`] (medians, ratios, tables), [`svg`] (charts), [`scenario`]
//! (staggered arrivals, CPU hog, sleeper, three on two), [`workload`] and [`probe`] (the
//! programs the demo and the tests start), [`machine`] (machine, date and command of a
//! report), `references` (cached sequential checksums) and
//! `output` (report.md, results.json, charts).
#![warn(missing_docs)]

pub mod machine;
pub mod mode;
mod output;
pub mod probe;
pub mod procfs;
pub mod reap;
mod references;
pub mod report;
pub mod scenario;
pub mod svg;
pub mod workload;

pub use mode::{AppRun, AppSpec, Mode, ModeRun, RunParams, Sample, WorkloadReport};
pub use workload::WorkloadArgs;

use indicatif::{ProgressBar, ProgressStyle};
use partita_workloads::App;
use references::references;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use workload::workload_params;

/// The error type of the demo's entry points (messages for the user).
pub type BoxError = Box<dyn std::error::Error>;

/// Options of `partita demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Applications of the mix, comma-separated (ocean, mp3d, cholesky, water, locus, pmake,
    /// hog, sleeper; repeat a name to run it twice). Overrides --mix.
    #[arg(long, value_delimiter = ',')]
    pub apps: Vec<String>,
    /// Named mix: `default` (locus, ocean, mp3d, cholesky, water: Tucker's LOMCW), `barrier`
    /// (ocean, mp3d, ocean, mp3d), `fine` (water, cholesky, locus, water: fork-join and
    /// task parallelism), `pmake` (locus, ocean, pmake: Tucker's LOP).
    #[arg(long, default_value = "default")]
    pub mix: String,
    /// Problem-size multiplier (1.0: each application takes roughly half a second alone).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Run every mode N times and report medians.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Where report.md, results.json and the SVG charts go.
    #[arg(long, default_value = "target/partita-demo")]
    pub out: PathBuf,
    /// Modes to run, comma-separated (uncontrolled, partitioned, process-control, batch).
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<String>,
    /// Workers per application (default: the CPUs this process may use).
    #[arg(long)]
    pub threads: Option<usize>,
    /// How long barriers spin before blocking, µs.
    #[arg(long, default_value_t = 2000)]
    pub spin_us: u64,
    /// An additional experiment instead of the mix in every mode: `staggered`, `hog`,
    /// `sleeper`, `three`.
    #[arg(long)]
    pub scenario: Option<String>,
    /// Seconds between arrivals in the staggered scenario.
    #[arg(long, default_value_t = 1.0)]
    pub stagger: f64,
    /// Manager reallocation period, ms (Tucker: 300).
    #[arg(long, default_value_t = 300)]
    pub realloc_ms: u64,
    /// Stop a mode that runs longer than this, seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// The named mixes.
///
/// ```
/// let m = partita_demo::mix("barrier").unwrap();
/// assert_eq!(m.len(), 4);
/// assert!(partita_demo::mix("nope").is_err());
/// ```
pub fn mix(name: &str) -> Result<Vec<App>, BoxError> {
    use App::*;
    Ok(match name {
        "default" => vec![Locus, Ocean, Mp3d, Cholesky, Water],
        "barrier" => vec![Ocean, Mp3d, Ocean, Mp3d],
        "fine" => vec![Water, Cholesky, Locus, Water],
        "pmake" => vec![Locus, Ocean, Pmake],
        other => {
            return Err(format!(
                "unknown --mix `{other}` (expected default, barrier, fine or pmake)"
            )
            .into())
        }
    })
}

/// Label applications uniquely: `ocean`, `ocean#2`, …
///
/// ```
/// use partita_workloads::App;
/// let s = partita_demo::label(&[App::Ocean, App::Water, App::Ocean]);
/// let names: Vec<_> = s.iter().map(|s| s.label.as_str()).collect();
/// assert_eq!(names, ["ocean", "water", "ocean#2"]);
/// ```
pub fn label(apps: &[App]) -> Vec<AppSpec> {
    let mut seen: BTreeMap<App, usize> = BTreeMap::new();
    apps.iter()
        .map(|&app| {
            let n = seen.entry(app).or_insert(0);
            *n += 1;
            AppSpec {
                label: if *n == 1 {
                    app.name().to_string()
                } else {
                    format!("{}#{}", app.name(), n)
                },
                app,
                start_after: Duration::ZERO,
            }
        })
        .collect()
}

fn parse_modes(names: &[String]) -> Result<Vec<Mode>, BoxError> {
    if names.is_empty() {
        return Ok(Mode::ALL.to_vec());
    }
    names
        .iter()
        .map(|n| {
            Mode::ALL
                .into_iter()
                .find(|m| m.name() == n.trim() || (n.trim() == "pc" && *m == Mode::ProcessControl))
                .ok_or_else(|| {
                    format!(
                        "unknown mode `{n}` in --modes (expected uncontrolled, partitioned, process-control, batch)"
                    )
                    .into()
                })
        })
        .collect()
}

/// The demo's one progress display (stderr): elapsed time, mode runs done out of all, and
/// what is happening now. Every stage reports through it; without a terminal it draws nothing
/// and the finished runs are printed as plain lines instead ([`run_modes`]).
fn progress_bar(mode_runs: usize) -> ProgressBar {
    let pb = ProgressBar::new(mode_runs as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:20.cyan/blue} {pos}/{len} mode runs · {wide_msg}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// What one demo invocation needs.
pub(crate) struct Setup {
    pub(crate) params: RunParams,
    pub(crate) out: PathBuf,
    pub(crate) pb: ProgressBar,
    pub(crate) command: String,
    pub(crate) started: std::time::SystemTime,
}

/// Validate the options shared by the mix and the scenarios; `mode_runs` is how many mode
/// runs the progress display counts to.
fn setup(args: &DemoArgs, mode_runs: usize) -> Result<Setup, BoxError> {
    if args.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    if !(args.stagger.is_finite() && args.stagger >= 0.0) {
        return Err(format!("invalid --stagger {}", args.stagger).into());
    }
    let threads = args.threads.unwrap_or_else(mode::available_cpus);
    // Validates threads and scale, naming the bad one.
    workload_params(Some(threads), args.scale, args.spin_us, 1.0)?;
    if args.realloc_ms == 0 {
        return Err("--realloc-ms must be positive".into());
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating --out {}: {e}", args.out.display()))?;
    let exe = std::env::current_exe()?;
    Ok(Setup {
        params: RunParams {
            exe,
            threads,
            scale: args.scale,
            spin_us: args.spin_us,
            helper_s: 0.0,
            sample: Duration::from_millis(25),
            timeout: Duration::from_secs(args.timeout.max(1)),
            realloc_ms: args.realloc_ms,
            log_dir: args.out.join("logs"),
        },
        out: args.out.clone(),
        pb: progress_bar(mode_runs),
        command: machine::command_line(
            std::env::args_os().map(|a| a.to_string_lossy().into_owned()),
        ),
        started: std::time::SystemTime::now(),
    })
}

/// Run the demo.
pub fn run(args: &DemoArgs) -> Result<(), BoxError> {
    if let Some(name) = &args.scenario {
        return scenario::run(name, args);
    }
    let apps: Vec<App> = if args.apps.is_empty() {
        mix(&args.mix)?
    } else {
        args.apps
            .iter()
            .map(|a| a.parse::<App>())
            .collect::<Result<_, _>>()?
    };
    if apps.is_empty() {
        return Err("--apps is empty".into());
    }
    let modes = parse_modes(&args.modes)?;
    let mut s = setup(args, modes.len() * args.repeat)?;
    let specs = label(&apps);
    // Helpers (hog, sleeper) in a mix run about as long as a typical application does.
    s.params.helper_s = 0.5 * args.scale;
    let wp = workload_params(Some(s.params.threads), args.scale, args.spin_us, 1.0)?;
    let expected = references(&apps, &wp, &s.params.exe, &s.out, &s.pb)?;
    let started = Instant::now();
    let runs = run_modes(&modes, &specs, &expected, &s, args.repeat)?;
    s.pb.finish_and_clear();
    let title = format!(
        "{} on {} CPUs, scale {}",
        specs
            .iter()
            .map(|s| s.label.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        runs.first().map_or(0, |r| r.cpus),
        args.scale
    );
    let summaries = report::summarize(&runs);
    print!("{}", report::to_text(&summaries));
    let written = output::write_outputs(&s, &title, &runs, &summaries, "", started.elapsed())?;
    println!("\nwrote {written}");
    check_results(&runs)
}

/// Run `modes` `repeat` times (interleaved, so slow drifts of the machine hit every mode).
pub(crate) fn run_modes(
    modes: &[Mode],
    specs: &[AppSpec],
    expected: &BTreeMap<App, u64>,
    s: &Setup,
    repeat: usize,
) -> Result<Vec<ModeRun>, BoxError> {
    let mut runs = Vec::new();
    for rep in 0..repeat {
        for &m in modes {
            let r = mode::run_mode(m, specs, expected, &s.params, &s.pb)?;
            s.pb.inc(1);
            let line = format!(
                "{m:>16}{}: makespan {:.2} s{}",
                if repeat > 1 {
                    format!(" (run {}/{repeat})", rep + 1)
                } else {
                    String::new()
                },
                r.makespan_s,
                if r.all_ok() {
                    ""
                } else {
                    "  ** WRONG RESULTS **"
                }
            );
            if s.pb.is_hidden() {
                // No terminal (CI, a pipe): the progress bar draws nothing, say it plainly.
                eprintln!("{line}");
            } else {
                s.pb.println(line);
            }
            runs.push(r);
        }
    }
    Ok(runs)
}

pub(crate) fn check_results(runs: &[ModeRun]) -> Result<(), BoxError> {
    let wrong: Vec<String> = runs
        .iter()
        .flat_map(|r| {
            r.apps.iter().filter(|a| !a.ok).map(move |a| {
                format!(
                    "{} in {}: {}",
                    a.label,
                    r.mode,
                    a.error.as_deref().unwrap_or("failed")
                )
            })
        })
        .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{} failed runs: {}", wrong.len(), wrong.join("; ")).into())
    }
}

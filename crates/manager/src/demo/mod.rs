//! `partita demo`: the multiprogrammed workload run in each mode (uncontrolled, partitioned,
//! process control, batch) with a report — Tucker 1993 ch. 7 and the NANOS paper's Figs. 2–4
//! on this machine.
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
//! (staggered arrivals, CPU hog, sleeper, three on two).

pub mod mode;
pub mod procfs;
pub mod reap;
pub mod report;
pub mod scenario;
pub mod svg;

pub use mode::{AppRun, AppSpec, Mode, ModeRun, RunParams, Sample, WorkloadReport};

use indicatif::{ProgressBar, ProgressStyle};
use partita_workloads::{App, Params};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error>;

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

/// Options of the hidden `partita workload` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {
    /// ocean, mp3d, cholesky, water, locus, pmake, hog or sleeper (`pmake-unit` is one unit
    /// process of pmake).
    pub name: String,
    /// Workers (pmake: concurrent unit processes). Default: the CPUs this process may use.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Problem-size multiplier.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// How long barriers spin before blocking, µs.
    #[arg(long, default_value_t = 2000)]
    pub spin_us: u64,
    /// Run time of hog and sleeper, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// The reference checksum; without it the sequential reference is computed after the run.
    #[arg(long)]
    pub expect: Option<u64>,
    /// Print the result as one JSON line.
    #[arg(long)]
    pub json: bool,
    /// Label shown in logs.
    #[arg(long)]
    pub name_label: Option<String>,
    /// pmake-unit: the unit index.
    #[arg(long)]
    pub unit: Option<usize>,
    /// pmake-unit: the scratch directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

fn workload_params(
    threads: Option<usize>,
    scale: f64,
    spin_us: u64,
    seconds: f64,
) -> Result<Params, BoxError> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(format!("invalid --seconds {seconds}").into());
    }
    let p = Params {
        threads: threads.unwrap_or_else(mode::available_cpus),
        scale,
        spin: Duration::from_micros(spin_us),
        duration: Duration::from_secs_f64(seconds),
    };
    p.validate()?;
    Ok(p)
}

/// Run one workload application in this process.
pub fn run_workload(args: &WorkloadArgs) -> Result<(), BoxError> {
    if args.name == "pmake-unit" {
        let (Some(unit), Some(dir)) = (args.unit, args.dir.as_ref()) else {
            return Err("pmake-unit needs --unit and --dir".into());
        };
        let sum = partita_workloads::pmake::run_unit(unit, dir)?;
        println!("{sum}");
        return Ok(());
    }
    let app: App = args.name.parse()?;
    let params = workload_params(args.threads, args.scale, args.spin_us, args.seconds)?;
    confine_if_asked();
    let exe = std::env::current_exe()?;
    let launcher = move |unit: usize, dir: &Path| {
        let mut c = std::process::Command::new(&exe);
        c.arg("workload")
            .arg("pmake-unit")
            .arg("--unit")
            .arg(unit.to_string())
            .arg("--dir")
            .arg(dir)
            .env_remove("PARTITA_CONFINE");
        c
    };
    let out = partita_workloads::run(app, &params, Some(&launcher))?;
    let expected = match args.expect {
        Some(e) => Some(e),
        None => partita_workloads::reference(app, &params)?,
    };
    let ok = expected.is_none_or(|e| e == out.checksum);
    let report = WorkloadReport {
        app: app.name().to_string(),
        checksum: out.checksum,
        expected,
        ok,
        compute_s: out.compute.as_secs_f64(),
        metrics: out
            .metrics
            .iter()
            .map(|&(k, v)| (k.to_string(), v))
            .collect(),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{}: {:.3} s, checksum {:016x} ({})",
            args.name_label.as_deref().unwrap_or(app.name()),
            report.compute_s,
            report.checksum,
            match expected {
                None => "no reference".to_string(),
                Some(_) if ok => "matches the sequential run".to_string(),
                Some(e) => format!("WRONG: the sequential run gives {e:016x}"),
            }
        );
        for (k, v) in &report.metrics {
            println!("  {k} = {v}");
        }
    }
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{}: checksum {:016x} differs from the sequential reference",
            app, out.checksum
        )
        .into())
    }
}

/// An uncontrolled program started by the demo in a managed mode joins the partition named in
/// `PARTITA_CONFINE` (the default partition, Tucker's default set), as `partita run` would.
fn confine_if_asked() {
    let (Some(part), Some(sock)) = (
        std::env::var_os("PARTITA_CONFINE"),
        std::env::var_os("PARTITA_SOCKET"),
    ) else {
        return;
    };
    let part = part.to_string_lossy().into_owned();
    if let Err(e) = crate::confine_self(Path::new(&sock), &part) {
        eprintln!("partita workload: could not join partition {part}: {e}; running unconfined");
    }
}

/// The named mixes.
///
/// ```
/// let m = partita_manager::demo::mix("barrier").unwrap();
/// assert_eq!(m.len(), 4);
/// assert!(partita_manager::demo::mix("nope").is_err());
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
/// let s = partita_manager::demo::label(&[App::Ocean, App::Water, App::Ocean]);
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

fn progress_bar() -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}") {
        pb.set_style(style);
    }
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// A stamp of the executable, so cached references are recomputed after every rebuild.
fn exe_stamp(exe: &Path) -> String {
    std::fs::metadata(exe)
        .ok()
        .and_then(|m| {
            let t = m
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            Some(format!("{}-{}", m.len(), t.as_nanos()))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Sequential reference checksums of `apps` at `params`, cached in `out/reference-cache.json`.
fn references(
    apps: &[App],
    params: &Params,
    exe: &Path,
    out: &Path,
    pb: &ProgressBar,
) -> Result<BTreeMap<App, u64>, BoxError> {
    let cache_path = out.join("reference-cache.json");
    let mut cache: BTreeMap<String, u64> = std::fs::read_to_string(&cache_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let stamp = exe_stamp(exe);
    let key = |a: App| format!("{}|scale={}|{}", a.name(), params.scale, stamp);
    let mut want: Vec<App> = apps.to_vec();
    want.sort();
    want.dedup();
    let missing: Vec<App> = want
        .iter()
        .copied()
        .filter(|&a| a.is_controlled() || a == App::Pmake)
        .filter(|&a| !cache.contains_key(&key(a)))
        .collect();
    if !missing.is_empty() {
        pb.set_message(format!(
            "computing sequential reference checksums ({})",
            missing
                .iter()
                .map(|a| a.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results = std::sync::Mutex::new(Vec::new());
        let workers = mode::available_cpus().min(missing.len()).max(1);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&app) = missing.get(i) else { break };
                    let r = partita_workloads::reference(app, params);
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((app, r));
                });
            }
        });
        for (app, r) in results
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            if let Some(sum) = r? {
                cache.insert(key(app), sum);
            }
        }
        cache.retain(|k, _| k.ends_with(&stamp));
        std::fs::write(&cache_path, serde_json::to_string_pretty(&cache)?)?;
    }
    Ok(want
        .into_iter()
        .filter_map(|a| cache.get(&key(a)).map(|&s| (a, s)))
        .collect())
}

/// Describe this machine in one line.
fn machine() -> String {
    let cpus = mode::available_cpus();
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{cpus} CPUs ({model}), Linux {kernel}")
}

/// What one demo invocation needs.
pub(crate) struct Setup {
    pub params: RunParams,
    pub out: PathBuf,
    pub pb: ProgressBar,
    pub command: String,
}

fn setup(args: &DemoArgs) -> Result<Setup, BoxError> {
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
        pb: progress_bar(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
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
    let mut s = setup(args)?;
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
    let written = write_outputs(&s, &title, &runs, &summaries, "", started.elapsed())?;
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

/// Write results.json, report.md and the charts; returns what was written, for the user.
pub(crate) fn write_outputs(
    s: &Setup,
    title: &str,
    runs: &[ModeRun],
    summaries: &[report::ModeSummary],
    extra_md: &str,
    took: Duration,
) -> Result<String, BoxError> {
    let out = &s.out;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "title": title,
            "command": s.command,
            "machine": machine(),
            "summaries": summaries,
            "runs": runs,
        }))?,
    )?;
    let mut charts = Vec::new();
    for m in Mode::ALL {
        if m == Mode::Batch {
            continue;
        }
        if let Some(r) = runs.iter().rev().find(|r| r.mode == m) {
            let name = format!("timeline-{}.svg", m.name());
            std::fs::write(out.join(&name), svg::timeline(r, &format!("{m}: {title}")))?;
            charts.push((m, name));
        }
    }
    if !summaries.is_empty() {
        std::fs::write(
            out.join("makespan.svg"),
            svg::makespans(summaries, &format!("Makespan per mode: {title}")),
        )?;
    }
    let mut md = String::new();
    let _ = writeln!(md, "# partita demo: {title}\n");
    let _ = writeln!(md, "- command: `{}`", s.command);
    let _ = writeln!(md, "- machine: {}", machine());
    let _ = writeln!(
        md,
        "- date: {} (seconds since the epoch); the demo took {:.1} s",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        took.as_secs_f64()
    );
    let _ = writeln!(
        md,
        "- time: each application's wall time from its start to its exit; CPU and context \
         switches: the kernel's counters for the process and its reaped children (`wait4`, the \
         same counters as `/proc/<pid>/task/*/status`); CPU share = CPU seconds / (makespan × CPUs)\n"
    );
    md.push_str(extra_md);
    if !summaries.is_empty() {
        md.push_str("\n## Results\n\n");
        md.push_str(&report::to_markdown(summaries));
        md.push_str("\n![makespan per mode](makespan.svg)\n");
    }
    for (m, name) in &charts {
        let _ = writeln!(md, "\n### Timeline: {m}\n\n![{m} timeline]({name})");
    }
    std::fs::write(out.join("report.md"), md)?;
    Ok(format!(
        "{}/report.md, results.json, makespan.svg and {} timeline SVGs",
        out.display(),
        charts.len()
    ))
}

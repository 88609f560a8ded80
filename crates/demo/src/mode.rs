//! Running one workload mix in one mode: start the applications as separate processes (the
//! hidden `partita workload` subcommand), sample them and the in-process manager while they
//! run, and collect what each did.

use super::procfs;
use super::reap;
use indicatif::ProgressBar;
use partita_workloads::App;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How the applications share the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every application with as many workers as CPUs, plain OS scheduling, no manager.
    Uncontrolled,
    /// The manager confines applications to CPU sets but does not change worker counts.
    Partitioned,
    /// The full system: CPU sets and worker targets.
    ProcessControl,
    /// One application after another, each alone (the papers' reference).
    Batch,
}

impl Mode {
    /// All modes, in the order the demo runs them.
    pub const ALL: [Mode; 4] = [
        Mode::Uncontrolled,
        Mode::Partitioned,
        Mode::ProcessControl,
        Mode::Batch,
    ];

    /// Short name.
    ///
    /// ```
    /// assert_eq!(partita_demo::Mode::ProcessControl.name(), "process-control");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Mode::Uncontrolled => "uncontrolled",
            Mode::Partitioned => "partitioned",
            Mode::ProcessControl => "process-control",
            Mode::Batch => "batch",
        }
    }

    /// Whether the mode runs the manager.
    ///
    /// ```
    /// use partita_demo::Mode;
    /// assert!(Mode::Partitioned.uses_manager() && !Mode::Batch.uses_manager());
    /// ```
    pub fn uses_manager(self) -> bool {
        matches!(self, Mode::Partitioned | Mode::ProcessControl)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One application of a mix.
#[derive(Debug, Clone, PartialEq)]
pub struct AppSpec {
    /// Unique label in the mix (`ocean`, `ocean#2`, …).
    pub label: String,
    /// The application.
    pub app: App,
    /// Start this long after the mode starts (staggered arrivals).
    pub start_after: Duration,
}

/// Parameters shared by every application of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunParams {
    /// The `partita` executable (for `partita workload`).
    pub exe: PathBuf,
    /// Workers per application (and jobs for pmake).
    pub threads: usize,
    /// Problem scale.
    pub scale: f64,
    /// Barrier spin before blocking, µs.
    pub spin_us: u64,
    /// Duration of the time-bound helpers (hog, sleeper), seconds.
    pub helper_s: f64,
    /// Timeline sampling period.
    pub sample: Duration,
    /// A mode taking longer than this is stopped and reported as failed.
    pub timeout: Duration,
    /// Manager reallocation period (ms).
    pub realloc_ms: u64,
    /// Where per-process logs go.
    pub log_dir: PathBuf,
}

/// What one application did in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppRun {
    /// Label in the mix.
    pub label: String,
    /// Application name.
    pub app: String,
    /// Whether it runs on partita-runtime.
    pub controlled: bool,
    /// Start, seconds after the mode started.
    pub start_s: f64,
    /// End, seconds after the mode started.
    pub end_s: f64,
    /// `end_s − start_s`.
    pub elapsed_s: f64,
    /// CPU seconds (user + system, all threads and reaped descendants; from `wait4`).
    pub cpu_s: f64,
    /// Voluntary context switches (all threads, from the kernel's per-task counters).
    pub vcsw: u64,
    /// Involuntary context switches.
    pub ivcsw: u64,
    /// The checksum it computed.
    pub checksum: Option<u64>,
    /// The checksum of the sequential reference.
    pub expected: Option<u64>,
    /// Exit status 0 and checksum equal to the reference (when there is one).
    pub ok: bool,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// Application measurements (`partita workload --json` metrics).
    pub metrics: BTreeMap<String, f64>,
}

/// One application in one timeline sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSample {
    /// Label in the mix.
    pub label: String,
    /// CPU seconds used so far (from `/proc/<pid>/stat`).
    pub cpu_s: f64,
    /// Threads running or runnable.
    pub runnable: u32,
    /// Manager's target for it (process control / partitioned modes).
    pub target: Option<u32>,
    /// Active workers it reports.
    pub active: Option<u32>,
    /// CPUs of its allocation.
    pub cpus: Option<Vec<usize>>,
    /// Those CPUs are its partition's, time-shared: the rotation gave it none of its own and
    /// the manager's `min_target` keeps one worker running.
    #[serde(default)]
    pub shared: bool,
}

/// The state of every running application at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds after the mode started.
    pub t_s: f64,
    /// Applications running at that instant.
    pub apps: Vec<AppSample>,
}

/// One mode's run of the mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeRun {
    /// The mode.
    pub mode: Mode,
    /// From the first start to the last end.
    pub makespan_s: f64,
    /// CPUs the applications could use (the manager's managed CPUs, or this process's).
    pub cpus: usize,
    /// Manager reallocation period, ms (0 without a manager).
    pub realloc_ms: u64,
    /// Every application.
    pub apps: Vec<AppRun>,
    /// Samples (every `RunParams::sample`).
    pub timeline: Vec<Sample>,
}

impl ModeRun {
    /// Whether every application finished with a correct result.
    ///
    /// ```
    /// use partita_demo::{Mode, ModeRun};
    /// let r = ModeRun { mode: Mode::Batch, makespan_s: 0.0, cpus: 2, realloc_ms: 0, apps: vec![], timeline: vec![] };
    /// assert!(r.all_ok());
    /// ```
    pub fn all_ok(&self) -> bool {
        self.apps.iter().all(|a| a.ok)
    }
}

/// The JSON line `partita workload --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// Application name.
    pub app: String,
    /// Its checksum.
    pub checksum: u64,
    /// The reference checksum it was compared with.
    pub expected: Option<u64>,
    /// Whether they matched (true when there is no reference).
    pub ok: bool,
    /// Seconds of computation proper.
    pub compute_s: f64,
    /// Application measurements.
    pub metrics: BTreeMap<String, f64>,
}

/// The CPUs this process may run on.
///
/// ```
/// assert!(partita_demo::mode::available_cpus() >= 1);
/// ```
pub fn available_cpus() -> usize {
    partita_manager::sys::get_affinity(0)
        .map(|s| s.iter().count())
        .unwrap_or(0)
        .max(1)
}

struct Running {
    spec: usize,
    pid: i32,
    child: Child,
    start: Instant,
}

struct Finished {
    spec: usize,
    end: Instant,
    exit: std::io::Result<reap::Exit>,
}

fn command(
    p: &RunParams,
    spec: &AppSpec,
    expected: Option<u64>,
    mode: Mode,
    socket: Option<&Path>,
) -> Command {
    let mut c = Command::new(&p.exe);
    c.arg("workload")
        .arg(spec.app.name())
        .arg("--json")
        .arg("--threads")
        .arg(p.threads.to_string())
        .arg("--scale")
        .arg(p.scale.to_string())
        .arg("--spin-us")
        .arg(p.spin_us.to_string())
        .arg("--seconds")
        .arg(p.helper_s.to_string())
        .arg("--name-label")
        .arg(&spec.label);
    if let Some(e) = expected {
        c.arg("--expect").arg(e.to_string());
    }
    match socket {
        Some(s) if mode.uses_manager() => {
            c.env("PARTITA_SOCKET", s).env_remove("PARTITA");
            if !spec.app.is_controlled() {
                // Uncontrolled programs go to the default partition, like Tucker's Pmake.
                c.env("PARTITA_CONFINE", "default");
            }
        }
        _ => {
            c.env("PARTITA", "off").env_remove("PARTITA_SOCKET");
        }
    }
    c.env_remove("PARTITA_CONFINE_DONE");
    c.stdin(Stdio::null()).stdout(Stdio::piped());
    c
}

/// Run `specs` together (or one after another in [`Mode::Batch`]) in `mode`.
pub fn run_mode(
    mode: Mode,
    specs: &[AppSpec],
    expected: &BTreeMap<App, u64>,
    p: &RunParams,
    progress: &ProgressBar,
) -> Result<ModeRun, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&p.log_dir)?;
    if mode == Mode::Batch {
        let mut run = ModeRun {
            mode,
            makespan_s: 0.0,
            cpus: available_cpus(),
            realloc_ms: 0,
            apps: Vec::new(),
            timeline: Vec::new(),
        };
        for spec in specs {
            let one = AppSpec {
                start_after: Duration::ZERO,
                ..spec.clone()
            };
            let r = run_group(
                mode,
                std::slice::from_ref(&one),
                expected,
                p,
                None,
                progress,
            )?;
            let offset = run.makespan_s;
            for mut a in r.apps {
                a.start_s += offset;
                a.end_s += offset;
                run.apps.push(a);
            }
            for mut s in r.timeline {
                s.t_s += offset;
                run.timeline.push(s);
            }
            run.makespan_s += r.makespan_s;
        }
        return Ok(run);
    }
    if !mode.uses_manager() {
        return run_group(mode, specs, expected, p, None, progress);
    }
    let dir = std::env::temp_dir().join(format!("partita-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let socket = dir.join(format!("{}.sock", mode.name()));
    let _ = std::fs::remove_file(&socket);
    let config = partita_manager::Config {
        control: if mode == Mode::Partitioned {
            partita_manager::Control::PartitionOnly
        } else {
            partita_manager::Control::Full
        },
        // Only what the demo starts counts as uncontrolled load, not the rest of the machine.
        uncontrolled: partita_manager::config::Uncontrolled::Tracked,
        realloc_period_ms: p.realloc_ms,
        ..partita_manager::Config::default()
    };
    let manager = partita_manager::spawn_in_process(config, socket.clone())?;
    let result = run_group(mode, specs, expected, p, Some(&manager), progress);
    manager.shutdown()?;
    let _ = std::fs::remove_dir(&dir);
    result
}

/// One group of applications running together: what was started, what is still to start,
/// what finished. [`run_group`] drives it: start what is due, sample, wait for exits.
struct Group<'a> {
    mode: Mode,
    specs: &'a [AppSpec],
    expected: &'a BTreeMap<App, u64>,
    p: &'a RunParams,
    manager: Option<&'a partita_manager::ManagerHandle>,
    t0: Instant,
    /// Indices into `specs` not started yet, the next to start last.
    pending: Vec<usize>,
    running: Vec<Running>,
    results: Vec<Option<AppRun>>,
    done: usize,
    tx: mpsc::Sender<Finished>,
    guard: KillOnDrop,
}

impl Group<'_> {
    /// Start every application whose start time has come, each with a reaper thread that
    /// reports its exit on `tx`.
    fn start_due(&mut self) -> Result<(), Box<dyn std::error::Error>> {
        let now = self.t0.elapsed();
        while let Some(&i) = self.pending.last() {
            if self.specs[i].start_after > now {
                break;
            }
            self.pending.pop();
            self.start(i)?;
        }
        Ok(())
    }

    fn start(&mut self, i: usize) -> Result<(), Box<dyn std::error::Error>> {
        let (spec, p) = (&self.specs[i], self.p);
        let log = std::fs::File::create(p.log_dir.join(format!(
            "{}-{}.log",
            self.mode.name(),
            spec.label.replace('#', "-")
        )))?;
        let mut cmd = command(
            p,
            spec,
            self.expected.get(&spec.app).copied(),
            self.mode,
            self.manager.map(|m| m.socket()),
        );
        cmd.stderr(log);
        let child = cmd
            .spawn()
            .map_err(|e| format!("starting {} ({}): {e}", spec.label, p.exe.display()))?;
        let pid = child.id() as i32;
        self.guard.0.push(pid);
        let tx = self.tx.clone();
        std::thread::Builder::new()
            .name(format!("reap-{pid}"))
            .spawn(move || {
                let exit = reap::wait(pid);
                let _ = tx.send(Finished {
                    spec: i,
                    end: Instant::now(),
                    exit,
                });
            })?;
        self.running.push(Running {
            spec: i,
            pid,
            child,
            start: Instant::now(),
        });
        Ok(())
    }

    /// The state of every running application now, from `/proc` and the manager.
    fn sample(&self) -> Sample {
        let status = self.manager.map(|m| m.status());
        let apps = self
            .running
            .iter()
            .filter_map(|r| {
                let s = procfs::sample(r.pid)?;
                let a = status.as_ref().and_then(|st| st.app_by_pid(r.pid));
                Some(AppSample {
                    label: self.specs[r.spec].label.clone(),
                    cpu_s: s.cpu_s,
                    runnable: s.runnable,
                    target: a.map(|a| a.target),
                    active: a.map(|a| a.active),
                    cpus: a.map(|a| a.cpus.clone()),
                    shared: a.is_some_and(|a| a.shared),
                })
            })
            .collect();
        Sample {
            t_s: self.t0.elapsed().as_secs_f64(),
            apps,
        }
    }

    fn running_names(&self) -> Vec<&str> {
        self.running
            .iter()
            .map(|r| self.specs[r.spec].label.as_str())
            .collect()
    }

    /// Record one exit reported by a reaper.
    fn finished(&mut self, f: Finished) -> Result<(), Box<dyn std::error::Error>> {
        let pos = self
            .running
            .iter()
            .position(|r| r.spec == f.spec)
            .ok_or("internal: exit of an application that is not running")?;
        let r = self.running.swap_remove(pos);
        self.guard.0.retain(|&pid| pid != r.pid);
        self.results[f.spec] = Some(collect(&self.specs[f.spec], r, &f, self.t0, self.expected));
        self.done += 1;
        Ok(())
    }
}

fn run_group(
    mode: Mode,
    specs: &[AppSpec],
    expected: &BTreeMap<App, u64>,
    p: &RunParams,
    manager: Option<&partita_manager::ManagerHandle>,
    progress: &ProgressBar,
) -> Result<ModeRun, Box<dyn std::error::Error>> {
    let cpus = manager
        .map(|m| m.status().cpus_managed)
        .unwrap_or_else(available_cpus);
    let (tx, rx) = mpsc::channel::<Finished>();
    let mut pending: Vec<usize> = (0..specs.len()).collect();
    pending.sort_by_key(|&i| specs[i].start_after);
    pending.reverse();
    let mut g = Group {
        mode,
        specs,
        expected,
        p,
        manager,
        t0: Instant::now(),
        pending,
        running: Vec::new(),
        results: vec![None; specs.len()],
        done: 0,
        tx,
        guard: KillOnDrop(Vec::new()),
    };
    let mut timeline = Vec::new();
    while g.done < specs.len() {
        g.start_due()?;
        let sample = g.sample();
        let t_s = sample.t_s;
        timeline.push(sample);
        let names = g.running_names();
        progress.set_message(format!(
            "{mode}: {} running [{}], {}/{} done, {t_s:.1} s",
            names.len(),
            names.join(" "),
            g.done,
            specs.len(),
        ));
        if g.t0.elapsed() > p.timeout {
            return Err(format!(
                "{mode}: still running after {:.0} s ({}); stopped (see the logs in {})",
                p.timeout.as_secs_f64(),
                names.join(", "),
                p.log_dir.display()
            )
            .into());
        }
        // Wait for the next sample time or an exit.
        let mut next = rx.recv_timeout(p.sample).ok();
        while let Some(f) = next.take() {
            g.finished(f)?;
            next = rx.try_recv().ok();
        }
    }
    let apps: Vec<AppRun> = g.results.into_iter().flatten().collect();
    let first = apps.iter().map(|a| a.start_s).fold(f64::INFINITY, f64::min);
    let last = apps.iter().map(|a| a.end_s).fold(0.0, f64::max);
    Ok(ModeRun {
        mode,
        makespan_s: if apps.is_empty() { 0.0 } else { last - first },
        cpus,
        realloc_ms: if manager.is_some() { p.realloc_ms } else { 0 },
        apps,
        timeline,
    })
}

/// Kills children still listed when a mode is abandoned (error or timeout).
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            reap::kill(pid);
        }
    }
}

fn collect(
    spec: &AppSpec,
    mut r: Running,
    f: &Finished,
    t0: Instant,
    expected: &BTreeMap<App, u64>,
) -> AppRun {
    let mut out = String::new();
    if let Some(mut s) = r.child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    let report: Option<WorkloadReport> = out
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l.trim()).ok());
    let expected = expected.get(&spec.app).copied();
    let mut run = AppRun {
        label: spec.label.clone(),
        app: spec.app.name().to_string(),
        controlled: spec.app.is_controlled(),
        start_s: r.start.duration_since(t0).as_secs_f64(),
        end_s: f.end.duration_since(t0).as_secs_f64(),
        elapsed_s: f.end.duration_since(r.start).as_secs_f64(),
        cpu_s: 0.0,
        vcsw: 0,
        ivcsw: 0,
        checksum: report.as_ref().map(|w| w.checksum),
        expected,
        ok: false,
        error: None,
        metrics: report
            .as_ref()
            .map(|w| w.metrics.clone())
            .unwrap_or_default(),
    };
    match &f.exit {
        Err(e) => run.error = Some(format!("wait4: {e}")),
        Ok(exit) => {
            run.cpu_s = exit.usage.cpu.as_secs_f64();
            run.vcsw = exit.usage.vcsw;
            run.ivcsw = exit.usage.ivcsw;
            if exit.code != Some(0) {
                run.error = Some(match (exit.code, exit.signal) {
                    (Some(c), _) => format!("exited with status {c}"),
                    (None, Some(s)) => format!("killed by signal {s}"),
                    _ => "ended abnormally".to_string(),
                });
            } else if report.is_none() {
                run.error = Some("printed no result".into());
            } else if expected.is_some() && run.checksum != expected {
                run.error = Some(format!(
                    "checksum {:?} differs from the reference {:?}",
                    run.checksum, expected
                ));
            } else {
                run.ok = true;
            }
        }
    }
    run
}

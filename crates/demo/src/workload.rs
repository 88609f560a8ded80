//! The hidden `partita workload` subcommand: one application of the demo's mix run on its own
//! (the demo starts each as a separate process), its result checked against the sequential
//! reference.

use crate::mode::{self, WorkloadReport};
use crate::BoxError;
use partita_workloads::{App, Params};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

pub(crate) fn workload_params(
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
    if let Err(e) = partita_manager::confine_self(Path::new(&sock), &part) {
        eprintln!("partita workload: could not join partition {part}: {e}; running unconfined");
    }
}

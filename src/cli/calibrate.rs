//! `partita calibrate`: measure sustained memory bandwidth with a STREAM-like triad
//! (`partita_numa::triad`) and store it where the bandwidth policy reads its capacity
//! (`bandwidth.capacity_gbps` in the configuration overrides the stored value).

use std::path::PathBuf;

/// `partita calibrate` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct CalibrateArgs {
    /// Threads, each pinned to one CPU (default: every CPU this process may use).
    #[arg(long)]
    pub threads: Option<usize>,
    /// MiB per array (three arrays); default: 4 × the last-level cache, at least 32 MiB.
    #[arg(long)]
    pub array_mib: Option<usize>,
    /// Timed repetitions (the best is stored, as STREAM reports).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// State file (default: `partita_numa::triad::default_state_path`).
    #[arg(long)]
    pub state_file: Option<PathBuf>,
    /// Print only; do not store.
    #[arg(long)]
    pub dry_run: bool,
}

impl Default for CalibrateArgs {
    fn default() -> Self {
        CalibrateArgs {
            threads: None,
            array_mib: None,
            reps: 5,
            state_file: None,
            dry_run: false,
        }
    }
}

/// Run the triad, print the bandwidth, store it.
///
pub fn run(args: &CalibrateArgs) -> Result<(), partita_manager::Error> {
    let bad = |key: &str, value: String, reason: &'static str| {
        partita_manager::Error::Config(partita_manager::ConfigError::Invalid {
            key: key.into(),
            value,
            reason,
        })
    };
    if args.reps == 0 {
        return Err(bad("--reps", "0".into(), "must be at least 1"));
    }
    if args.threads == Some(0) {
        return Err(bad("--threads", "0".into(), "must be at least 1"));
    }
    if args.array_mib == Some(0) {
        return Err(bad("--array-mib", "0".into(), "must be at least 1"));
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let llc = partita_numa::triad::llc_bytes();
    let bytes = match args.array_mib {
        Some(m) => m << 20,
        None => (4 * llc.unwrap_or(8 << 20)).max(32 << 20),
    };
    let result = partita_numa::triad::measure(threads, bytes, args.reps);
    println!(
        "triad: {} threads, 3 arrays of {} MiB (LLC {}): best {:.2} GB/s, median {:.2} GB/s",
        result.threads,
        result.array_bytes >> 20,
        llc.map_or("unknown".to_string(), |b| format!("{} KiB", b >> 10)),
        result.best_gbps,
        result.median_gbps
    );
    if !args.dry_run {
        let path = args
            .state_file
            .clone()
            .unwrap_or_else(partita_numa::triad::default_state_path);
        partita_numa::triad::Calibration {
            gbps: result.best_gbps,
            threads: result.threads,
            array_bytes: result.array_bytes,
        }
        .save(&path)
        .map_err(|source| partita_manager::Error::Io {
            context: format!("store calibration in {}", path.display()),
            source,
        })?;
        println!(
            "stored in {} (the manager's bandwidth capacity)",
            path.display()
        );
    }
    Ok(())
}

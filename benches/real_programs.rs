//! Real rayon programs we did not write, against the shipped default (issue 26).
//!
//! `cargo bench --bench real_programs` (15 pairs of the short programs, 5 of the long one)
//! `cargo bench --bench real_programs -- --quick` (3 and 1: a smoke run)
//! `cargo bench --bench real_programs -- --pairs 21 --long-pairs 7 --only b3sum`
//!
//! Three unmodified programs from crates.io (`common/real_build.rs`), each built stock and
//! through `[patch.crates-io] rayon-core = compat/rayon-core`, into `target/real-programs/`
//! (cached): `b3sum` hashing a 256 MiB file (~60 ms: a short program), `tokei` counting the
//! lines of this checkout's sources (short) and `oxipng` optimising a generated PNG (> 1 s).
//!
//! Each runs alone and as four copies started together, in these modes:
//! - `stock`: the stock build;
//! - `off`: the patched build with `PARTITA=off` (never registers);
//! - `serve`: the patched build under a real `partita serve` started as README says (no
//!   config: the defaults, system-wide accounting), on a private socket (`PARTITA_SOCKET`);
//! - `static` (four at once only): the stock build, each copy limited to its share of the
//!   CPUs (`RAYON_NUM_THREADS = max(1, CPUs / copies)`): the best static split.
//!
//! The manager runs for the whole benchmark, as the service it is, so `stock` and `off` run
//! beside an idle manager that they never talk to. Runs are paired: every round runs each
//! mode once, in order on even rounds and in reverse on odd ones (A B, B A, ...); the table
//! gives medians of the times and medians of the per-round ratios. The patched builds run
//! with `PARTITA_STATS` (`crates/runtime/src/exit_stats.rs`), so every copy reports its parks
//! and the target changes (allocation changes) it saw, summed over its pools (b3sum builds
//! its own pool; the others use the global one); a patched copy that reports nothing
//! fails the benchmark (the patch did not take), as does any copy that exits non-zero or whose
//! output differs from the stock build's.

#[path = "common/real_build.rs"]
mod real_build;
#[path = "common/real_inputs.rs"]
mod real_inputs;
#[path = "common/serve.rs"]
mod serve;

use clap::Parser;
use partita_stats::median;
use real_build::Program;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

type BoxError = Box<dyn std::error::Error>;

/// Options (after `--` with `cargo bench`).
#[derive(Debug, Clone, Parser)]
struct Args {
    /// Rounds (pairs) for the short programs.
    #[arg(long, default_value_t = 15)]
    pairs: usize,
    /// Rounds for the long program (oxipng).
    #[arg(long, default_value_t = 5)]
    long_pairs: usize,
    /// Smoke run: 3 rounds of the short programs, 1 of the long one.
    #[arg(long)]
    quick: bool,
    /// Copies started together in the four-at-once cases.
    #[arg(long, default_value_t = 4)]
    copies: usize,
    /// Only the programs whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

const PROGRAMS: [Program; 3] = [
    Program {
        krate: "b3sum",
        version: "1.8.7",
        bin: "b3sum",
    },
    Program {
        krate: "tokei",
        version: "15.0.0",
        bin: "tokei",
    },
    Program {
        krate: "oxipng",
        version: "10.2.1",
        bin: "oxipng",
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Stock,
    Off,
    Serve,
    Static,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Stock => "stock",
            Mode::Off => "PARTITA=off",
            Mode::Serve => "serve",
            Mode::Static => "static split",
        }
    }
}

/// Everything a run needs to start a program.
struct Setup {
    /// Per program of `PROGRAMS`, its stock and patched builds (`None`: not selected).
    exes: Vec<Option<[PathBuf; 2]>>,
    inputs: Vec<Vec<OsString>>,
    work: PathBuf,
    socket: PathBuf,
    cpus: usize,
}

/// One run: makespan, each patched copy's stats line, copy 0's output.
struct Run {
    secs: f64,
    lines: Vec<StatsLine>,
    output: Vec<u8>,
}

#[derive(Debug, Clone, Copy, Default)]
struct StatsLine {
    parks: u64,
    changes: u64,
}

fn main() -> Result<(), BoxError> {
    let mut args = Args::parse();
    if args.quick {
        (args.pairs, args.long_pairs) = (3, 1);
    }
    if args.pairs == 0 || args.long_pairs == 0 || args.copies == 0 {
        return Err("--pairs, --long-pairs and --copies must be at least 1".into());
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Only the programs `--only` selects are built (oxipng's two builds take 10–15 min).
    let selected = |p: &Program| args.only.as_deref().is_none_or(|o| p.krate.contains(o));
    let chosen: Vec<Program> = PROGRAMS.iter().copied().filter(selected).collect();
    let mut built = real_build::build_all(&chosen)?.into_iter();
    let exes = PROGRAMS
        .iter()
        .map(|p| if selected(p) { built.next() } else { None })
        .collect();
    let data = real_build::root().join("data");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let inputs = vec![
        vec![real_inputs::random_file(&data, 256)?.into()],
        vec![repo.join("crates").into(), repo.join("compat").into()],
        vec![
            "-o".into(),
            "2".into(),
            "--force".into(),
            real_inputs::png(&data, 1600)?.into(),
        ],
    ];
    let work = real_build::root().join(format!("run-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let manager = serve::Serve::start(&work.join("serve"))?;
    let setup = Setup {
        exes,
        inputs,
        socket: manager.socket().to_path_buf(),
        work: work.clone(),
        cpus,
    };
    println!("{}", machine_line(cpus));
    let rows = run_all(&args, &setup)?;
    manager.stop()?;
    let _ = std::fs::remove_dir_all(&work);
    print_table(&rows, &args);
    println!("after: {}", machine_line(cpus));
    Ok(())
}

fn machine_line(cpus: usize) -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!("{cpus} CPUs, load average {}", load.join(" "))
}

/// One row of the table: a program alone or as several copies, and each mode's runs.
struct Row {
    program: &'static str,
    copies: usize,
    modes: Vec<(Mode, Vec<Run>)>,
}

fn run_all(args: &Args, setup: &Setup) -> Result<Vec<Row>, BoxError> {
    let mut rows = Vec::new();
    for (p, program) in PROGRAMS.iter().enumerate() {
        if args
            .only
            .as_deref()
            .is_some_and(|o| !program.krate.contains(o))
        {
            continue;
        }
        let rounds = if program.krate == "oxipng" {
            args.long_pairs
        } else {
            args.pairs
        };
        for copies in [1, args.copies] {
            let mut modes: Vec<Mode> = vec![Mode::Stock, Mode::Off, Mode::Serve];
            if copies > 1 {
                modes.push(Mode::Static);
            }
            let mut row = Row {
                program: program.krate,
                copies,
                modes: modes.iter().map(|&m| (m, Vec::new())).collect(),
            };
            for round in 0..rounds {
                let order: Vec<usize> = if round % 2 == 0 {
                    (0..modes.len()).collect()
                } else {
                    (0..modes.len()).rev().collect()
                };
                for i in order {
                    let r = run_once(setup, p, modes[i], copies)?;
                    eprintln!(
                        "{} ×{copies} round {}/{rounds} {:<12} {:.3} s",
                        program.krate,
                        round + 1,
                        modes[i].name(),
                        r.secs
                    );
                    row.modes[i].1.push(r);
                }
                check_outputs(&row, round)?;
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Copy 0's output must be the same in every mode (the patch changes no result).
fn check_outputs(row: &Row, round: usize) -> Result<(), BoxError> {
    let stock = &row.modes[0].1[round].output;
    for (mode, runs) in &row.modes[1..] {
        if &runs[round].output != stock {
            return Err(format!(
                "{}: the output under {} differs from the stock build's",
                row.program,
                mode.name()
            )
            .into());
        }
    }
    Ok(())
}

/// Start `copies` copies of program `p` in `mode` together; wait for all.
fn run_once(setup: &Setup, p: usize, mode: Mode, copies: usize) -> Result<Run, BoxError> {
    let patched = matches!(mode, Mode::Off | Mode::Serve);
    let exe = &setup.exes[p]
        .as_ref()
        .ok_or("internal: a program not built")?[usize::from(patched)];
    let stats = setup.work.join("stats.txt");
    let _ = std::fs::remove_file(&stats);
    let mut children = Vec::new();
    let t0 = Instant::now();
    for copy in 0..copies {
        let out = setup.work.join(format!("out-{copy}"));
        let mut c = Command::new(exe);
        c.args(&setup.inputs[p])
            .env_remove("PARTITA")
            .env_remove("PARTITA_SOCKET")
            .env_remove("PARTITA_STATS")
            .env_remove("RAYON_NUM_THREADS")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(Stdio::null());
        if PROGRAMS[p].krate == "oxipng" {
            c.arg("--out").arg(out.with_extension("png"));
        }
        match mode {
            Mode::Stock => {}
            Mode::Off => {
                c.env("PARTITA", "off").env("PARTITA_STATS", &stats);
            }
            Mode::Serve => {
                c.env("PARTITA_SOCKET", &setup.socket)
                    .env("PARTITA_STATS", &stats);
            }
            Mode::Static => {
                c.env(
                    "RAYON_NUM_THREADS",
                    (setup.cpus / copies).max(1).to_string(),
                );
            }
        }
        children.push(c.spawn()?);
    }
    for mut c in children {
        let status = c.wait()?;
        if !status.success() {
            return Err(format!(
                "{} ({}) exited with {status}",
                PROGRAMS[p].krate,
                mode.name()
            )
            .into());
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let lines = read_stats(&stats)?;
    if patched && lines.len() != copies {
        return Err(format!(
            "{} ({}): {} of {copies} copies wrote PARTITA_STATS: is the patch applied?",
            PROGRAMS[p].krate,
            mode.name(),
            lines.len()
        )
        .into());
    }
    let out0 = setup.work.join("out-0");
    let mut output = std::fs::read(&out0)?;
    if PROGRAMS[p].krate == "oxipng" {
        output.extend(std::fs::read(out0.with_extension("png"))?);
    }
    Ok(Run {
        secs,
        lines,
        output,
    })
}

/// The `PARTITA_STATS` lines, summed per process (one line per pool it built).
fn read_stats(path: &Path) -> Result<Vec<StatsLine>, BoxError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut per_pid: std::collections::BTreeMap<u64, StatsLine> = Default::default();
    for l in text.lines() {
        let get = |k: &str| -> Result<u64, BoxError> {
            l.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .find(|(key, _)| *key == k)
                .and_then(|(_, v)| v.parse().ok())
                .ok_or_else(|| format!("PARTITA_STATS line without {k}: {l}").into())
        };
        let s = per_pid.entry(get("pid")?).or_default();
        s.parks += get("parks")?;
        s.changes += get("target_changes")?;
    }
    Ok(per_pid.into_values().collect())
}

fn print_table(rows: &[Row], args: &Args) {
    println!(
        "rounds: {} (short programs), {} (oxipng); times are medians (s), ratios medians of \
         per-round ratios; parks and changes: per copy, median over serve runs",
        args.pairs, args.long_pairs
    );
    println!(
        "| program | copies | stock s | PARTITA=off s | serve s | static split s \
         | serve / off | serve / stock | serve / static | parks | allocation changes \
         | parks per change |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let times = |m: Mode| -> Option<&Vec<Run>> {
            row.modes.iter().find(|(x, _)| *x == m).map(|(_, v)| v)
        };
        let med = |m: Mode| times(m).map(|v| median(&v.iter().map(|r| r.secs).collect::<Vec<_>>()));
        let ratio = |m: Mode| {
            let (Some(s), Some(o)) = (times(Mode::Serve), times(m)) else {
                return "–".to_string();
            };
            let r: Vec<f64> = s.iter().zip(o).map(|(a, b)| a.secs / b.secs).collect();
            format!("{:.3}×", median(&r))
        };
        let fmt = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.3}"));
        let serve: Vec<StatsLine> = times(Mode::Serve)
            .map(|v| v.iter().flat_map(|r| r.lines.clone()).collect())
            .unwrap_or_default();
        let parks = median(&serve.iter().map(|s| s.parks as f64).collect::<Vec<_>>());
        let changes = median(&serve.iter().map(|s| s.changes as f64).collect::<Vec<_>>());
        let total_parks: u64 = serve.iter().map(|s| s.parks).sum();
        let total_changes: u64 = serve.iter().map(|s| s.changes).sum();
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {parks:.0} | {changes:.0} | {} |",
            row.program,
            row.copies,
            fmt(med(Mode::Stock)),
            fmt(med(Mode::Off)),
            fmt(med(Mode::Serve)),
            fmt(med(Mode::Static)),
            ratio(Mode::Off),
            ratio(Mode::Stock),
            ratio(Mode::Static),
            if total_changes == 0 {
                format!("{total_parks} parks, no change")
            } else {
                format!("{:.2}", total_parks as f64 / total_changes as f64)
            },
        );
    }
}

//! pmake-like: a parallel make. A driver keeps `threads` unit processes running (`make -jN`),
//! one process per compilation unit; each unit writes its source file, reads it back, burns
//! CPU on it (the "compile"), and writes and syncs its object file. Processes, not tasks: it
//! cannot follow process control, like Tucker's Pmake.
//!
//! A unit's checksum depends only on its index; the driver combines them in index order.

use crate::{Checksum, Params, UnitLauncher, WorkloadError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

/// Bytes of a unit's source file.
const SOURCE_BYTES: usize = 256 * 1024;
/// Passes of the CPU burst over the source.
const PASSES: usize = 48;

/// Units at `params`: 24 at scale 1.
///
/// ```
/// assert_eq!(partita_workloads::pmake::units(&partita_workloads::Params::default()), 24);
/// ```
pub fn units(params: &Params) -> usize {
    params.scaled(24.0, 1)
}

fn source(unit: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(SOURCE_BYTES);
    let mut x = unit as u64;
    while out.len() < SOURCE_BYTES {
        x = crate::splitmix(x);
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The "compilation": several hashing passes over the source.
fn compile(src: &[u8]) -> u64 {
    let mut c = Checksum::new();
    for pass in 0..PASSES {
        c.u64(pass as u64);
        for w in src.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            c.u64(u64::from_le_bytes(b));
        }
    }
    c.finish()
}

fn io_err(context: String) -> impl FnOnce(std::io::Error) -> WorkloadError {
    move |source| WorkloadError::Io { context, source }
}

/// One unit, run in its own process: write the source into `dir`, read it back, compile,
/// write and sync the object. Returns the unit's checksum.
pub fn run_unit(unit: usize, dir: &Path) -> Result<u64, WorkloadError> {
    let src_path = dir.join(format!("unit{unit}.c"));
    let obj_path = dir.join(format!("unit{unit}.o"));
    let src = source(unit);
    let mut f = std::fs::File::create(&src_path)
        .map_err(io_err(format!("creating {}", src_path.display())))?;
    f.write_all(&src)
        .and_then(|()| f.sync_data())
        .map_err(io_err(format!("writing {}", src_path.display())))?;
    drop(f);
    let mut back = Vec::with_capacity(SOURCE_BYTES);
    std::fs::File::open(&src_path)
        .and_then(|mut f| f.read_to_end(&mut back))
        .map_err(io_err(format!("reading {}", src_path.display())))?;
    let sum = compile(&back);
    let mut o = std::fs::File::create(&obj_path)
        .map_err(io_err(format!("creating {}", obj_path.display())))?;
    o.write_all(&sum.to_le_bytes())
        .and_then(|()| o.sync_data())
        .map_err(io_err(format!("writing {}", obj_path.display())))?;
    Ok(sum)
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn finish(unit: usize, child: Child) -> Result<u64, WorkloadError> {
    let out = child
        .wait_with_output()
        .map_err(io_err(format!("waiting for unit {unit}")))?;
    if !out.status.success() {
        return Err(WorkloadError::Unit {
            unit,
            reason: format!(
                "exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().parse::<u64>().map_err(|_| WorkloadError::Unit {
        unit,
        reason: format!("printed `{}`, expected a checksum", text.trim()),
    })
}

/// Run every unit as a separate process, `params.threads` at a time, started by `launch`.
pub fn run(params: &Params, launch: UnitLauncher<'_>) -> Result<u64, WorkloadError> {
    let dir = std::env::temp_dir().join(format!("partita-pmake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let scratch = Scratch(dir);
    let n = units(params);
    let mut sums = vec![0u64; n];
    let mut running: Vec<(usize, Child)> = Vec::new();
    let result = drive(params, launch, &scratch.0, &mut sums, &mut running);
    // On failure, stop the units still running before the scratch directory goes away.
    for (_, mut child) in running {
        let _ = child.kill();
        let _ = child.wait();
    }
    result?;
    let mut c = Checksum::new();
    for s in sums {
        c.u64(s);
    }
    Ok(c.finish())
}

/// Keep `params.threads` units running until all are done, recording their checksums.
fn drive(
    params: &Params,
    launch: UnitLauncher<'_>,
    dir: &Path,
    sums: &mut [u64],
    running: &mut Vec<(usize, Child)>,
) -> Result<(), WorkloadError> {
    let n = sums.len();
    let mut next = 0;
    while next < n || !running.is_empty() {
        while next < n && running.len() < params.threads {
            let child = launch(next, dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(io_err(format!("starting unit {next}")))?;
            running.push((next, child));
            next += 1;
        }
        // Wait for the oldest unit (units take about as long as each other).
        let (unit, child) = running.remove(0);
        sums[unit] = finish(unit, child)?;
    }
    Ok(())
}

/// The checksum of a sequential run (no files, no processes).
pub fn reference(params: &Params) -> u64 {
    let mut c = Checksum::new();
    for unit in 0..units(params) {
        c.u64(compile(&source(unit)));
    }
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_round_trips_through_its_files() {
        let dir = std::env::temp_dir().join(format!("partita-pmake-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _s = Scratch(dir.clone());
        assert_eq!(run_unit(3, &dir).unwrap(), compile(&source(3)));
        assert!(dir.join("unit3.o").exists());
    }

    #[test]
    fn units_differ() {
        assert_ne!(compile(&source(0)), compile(&source(1)));
    }

    #[test]
    fn a_failing_unit_is_reported() {
        let params = Params {
            threads: 2,
            scale: 0.1,
            ..Params::default()
        };
        let launch = |_: usize, _: &Path| std::process::Command::new("false");
        let e = run(&params, &launch).unwrap_err().to_string();
        assert!(e.contains("unit 0"), "{e}");
    }
}

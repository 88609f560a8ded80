//! Measuring a build from its jobs' own stamps: a generated Makefile of CPU-bound jobs that
//! write their start and end times (`CLOCK_REALTIME` ns) to files, and the analysis the tests
//! and the benchmark apply to them (how many jobs ran at once, and for how long more ran than
//! the build's allocation allowed).

use std::path::Path;

/// A Makefile of `jobs` CPU-bound jobs (`awk` summing `iterations` numbers) whose recipes write
/// `st.jobN` / `en.jobN` into `stamp_dir`. `make` (target `all`) runs them all.
///
/// ```
/// let m = partita_jobserver::stamps::cpu_bound_makefile(3, "/tmp/s".as_ref(), 1000);
/// assert!(m.contains("job3"));
/// ```
pub fn cpu_bound_makefile(jobs: usize, stamp_dir: &Path, iterations: u64) -> String {
    let d = stamp_dir.display();
    let names: Vec<String> = (1..=jobs).map(|i| format!("job{i}")).collect();
    format!(
        ".PHONY: all {all}\nall: {all}\n{all}:\n\t@date +%s%N > {d}/st.$@; \
         awk 'BEGIN{{for(i=0;i<{iterations};i++)s+=i; if (s<0) print s}}'; \
         date +%s%N > {d}/en.$@\n",
        all = names.join(" ")
    )
}

/// `(start, end)` of every job that wrote both stamps in `dir`.
pub fn read_intervals(dir: &Path) -> std::io::Result<Vec<(u64, u64)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(job) = name.strip_prefix("st.") else {
            continue;
        };
        let read =
            |p: &Path| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
        if let (Some(s), Some(t)) = (read(&e.path()), read(&dir.join(format!("en.{job}")))) {
            v.push((s, t));
        }
    }
    Ok(v)
}

/// Most jobs running at once.
///
/// ```
/// assert_eq!(partita_jobserver::stamps::max_concurrency(&[(0, 10), (5, 15), (10, 20)]), 2);
/// ```
pub fn max_concurrency(iv: &[(u64, u64)]) -> u32 {
    let mut ev: Vec<(u64, i32)> = iv.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    ev.sort(); // ends (-1) sort before starts (+1) at the same instant
    let (mut c, mut m) = (0i32, 0i32);
    for (_, d) in ev {
        c += d;
        m = m.max(c);
    }
    m as u32
}

/// Longest stretch (ns) during which more jobs ran than the allocation allowed. `alloc` is
/// `(time, CPUs)` samples in time order, a step function; before the first sample, and for an
/// allocation of 0, one job is allowed (a client's implicit slot).
///
/// ```
/// use partita_jobserver::stamps::longest_excess;
/// // Two jobs over [0, 10) and [2, 8); allocation 1 until 5, then 2: excess from 2 to 5.
/// assert_eq!(longest_excess(&[(0, 10), (2, 8)], &[(0, 1), (5, 2)]), 3);
/// ```
pub fn longest_excess(iv: &[(u64, u64)], alloc: &[(u64, u32)]) -> u64 {
    // Events: +1/-1 job, or a new allocation.
    let mut ev: Vec<(u64, u8, i64)> = Vec::new();
    for &(s, e) in iv {
        ev.push((s, 1, 1));
        ev.push((e, 0, -1));
    }
    for &(t, a) in alloc {
        ev.push((t, 2, i64::from(a)));
    }
    ev.sort();
    let (mut running, mut allowed) = (0i64, 1i64);
    let (mut since, mut longest) = (None::<u64>, 0u64);
    for (t, kind, v) in ev {
        match kind {
            2 => allowed = v.max(1),
            _ => running += v,
        }
        match (running > allowed, since) {
            (true, None) => since = Some(t),
            (false, Some(s)) => {
                longest = longest.max(t - s);
                since = None;
            }
            _ => {}
        }
    }
    longest
}

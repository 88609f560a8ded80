//! `PARTITA_STATS=<file>`: when the process exits, every pool it built (the global one and
//! any `ThreadPoolBuilder::build` pool, dropped or not) appends one line of its counters to
//! `<file>`. For programs we did not write (rayon programs patched onto `compat/rayon-core`),
//! which cannot call `partita_runtime::stats()` themselves: a benchmark sets the variable and
//! counts each program's parks and the target changes it saw (`benches/real_programs.rs`).
//!
//! The line is `key=value` pairs separated by spaces (see [`line`]), written with one
//! `O_APPEND` write, so copies of a program that exit together do not interleave. Without the
//! variable nothing is armed, kept or written. With it, each pool's shared state is kept until
//! the process exits (its threads still end when it is dropped), so that a pool dropped
//! before the end, or never dropped because the program calls `std::process::exit` inside it
//! (b3sum does), is reported all the same. A process that ends by a signal or `_exit` writes
//! nothing.

use crate::registry::Registry;
use crate::PoolStats;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// The environment variable naming the file the line is appended to.
pub(crate) const VAR: &str = "PARTITA_STATS";

/// Every pool built while `PARTITA_STATS` is set, in the order they were built.
static POOLS: Mutex<Vec<Arc<Registry>>> = Mutex::new(Vec::new());

/// Called by `Registry::new` for every pool: when `PARTITA_STATS` is set, keep the pool for
/// the report and, for the first, arrange for [`at_exit`] to run at process exit.
pub(crate) fn arm(registry: &Arc<Registry>) {
    if std::env::var_os(VAR).is_none() {
        return;
    }
    let mut pools = crate::sync::lock(&POOLS);
    pools.push(Arc::clone(registry));
    if pools.len() > 1 {
        return;
    }
    // SAFETY: `atexit` only records the function pointer; `at_exit` is an `extern "C" fn()`
    // that takes no arguments and never unwinds (it catches panics itself).
    let rc = unsafe { libc::atexit(at_exit) };
    if rc != 0 {
        tracing::warn!("{VAR}: atexit failed (rc {rc}); no statistics will be written");
    }
}

/// The exit hook: append one line per pool. Errors go to stderr (the process is ending).
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(path) = std::env::var_os(VAR) else {
            return;
        };
        let (pid, name) = (std::process::id(), program_name());
        let text: String = crate::sync::lock(&POOLS)
            .iter()
            .map(|r| line(&r.stats(), pid, &name))
            .collect();
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            eprintln!("{VAR}: cannot append to {}: {e}", path.to_string_lossy());
        }
    });
}

/// The name a manager would list the program under: `PARTITA_NAME`, else the executable's.
fn program_name() -> String {
    std::env::var("PARTITA_NAME")
        .ok()
        .or_else(|| {
            std::env::args_os().next().and_then(|a| {
                std::path::Path::new(&a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
        })
        .unwrap_or_default()
        .replace(char::is_whitespace, "_")
}

/// One line: `pid=… name=… threads=… target=… active=… target_changes=… parks=… unparks=…
/// tasks=… steals=… sleeps=… suspended_ms=… idle_ms=…`, newline-terminated.
pub(crate) fn line(s: &PoolStats, pid: u32, name: &str) -> String {
    format!(
        "pid={pid} name={name} threads={} target={} active={} target_changes={} \
         parks={} unparks={} tasks={} steals={} sleeps={} suspended_ms={:.1} idle_ms={:.1}\n",
        s.num_threads,
        s.target_workers,
        s.active_workers,
        s.target_changes,
        s.parks,
        s.unparks,
        s.tasks_run,
        s.steals,
        s.sleeps,
        s.suspended_time.as_secs_f64() * 1e3,
        s.idle_time.as_secs_f64() * 1e3,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_line_is_key_value_pairs_on_one_line() {
        let s = PoolStats {
            num_threads: 2,
            target_workers: 1,
            active_workers: 1,
            parks: 3,
            unparks: 2,
            target_changes: 4,
            tasks_run: 40,
            suspended_time: Duration::from_micros(1500),
            ..Default::default()
        };
        let l = line(&s, 77, "b3sum");
        assert!(l.ends_with('\n') && l.matches('\n').count() == 1, "{l:?}");
        let pairs: Vec<(&str, &str)> = l
            .split_whitespace()
            .map(|kv| kv.split_once('=').expect("key=value"))
            .collect();
        let get = |k: &str| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        assert_eq!(get("pid"), Some("77"));
        assert_eq!(get("name"), Some("b3sum"));
        assert_eq!(get("threads"), Some("2"));
        assert_eq!(get("target_changes"), Some("4"));
        assert_eq!(get("parks"), Some("3"));
        assert_eq!(get("unparks"), Some("2"));
        assert_eq!(get("suspended_ms"), Some("1.5"));
    }

    #[test]
    fn target_changes_counts_each_change_not_each_call() {
        let pool = crate::ThreadPoolBuilder::new()
            .num_threads(2)
            .process_control(crate::ProcessControl::Manual)
            .build()
            .unwrap();
        assert_eq!(pool.stats().target_changes, 0);
        pool.set_target_workers(1);
        pool.set_target_workers(1);
        assert_eq!(pool.stats().target_changes, 1);
        pool.set_target_workers(2);
        assert_eq!(pool.stats().target_changes, 2);
    }
}

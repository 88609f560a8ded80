//! The mover: per-application state between rounds (placement history, budget, the
//! migration in progress), the policy's decisions carried out through a [`Kernel`], and
//! errors logged once per application.
//!
//! Each round gets the applications' placements (when the registry changed) and acts on the
//! applications that are due; it never holds the registry's lock (the views are copies), so
//! a migration never delays an allocation. Failed calls: a process that is gone (`ESRCH`, or
//! its pidfd says so) is dropped quietly; one the manager may not act on (`EPERM`, `EACCES`)
//! is never tried again; any other failure (`ENOMEM`: the destination is full) ends the
//! migration of that placement — the next placement change may try again. Every failure is
//! logged once per application (the first at `warn`, later ones at `debug`): no retry storm.

use super::pages::{self, Kernel, Work};
use super::policy::{self, Bucket, Decision, Facts, Params, Placement, Why};
use super::stats::{AppReport, Stats};
use crate::proc_ref::ProcRef;
use partita_numa::NumaError;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One registered application as the registry sees it (a copy).
#[derive(Debug, Clone)]
pub struct View {
    /// Its id.
    pub id: u32,
    /// Its process.
    pub proc: ProcRef,
    /// Its name (the configuration's `exclude` matches it).
    pub name: String,
    /// The node of each CPU of its published set (empty: not confined).
    pub cpu_nodes: Vec<u32>,
}

/// Most placements remembered per application.
const HISTORY: usize = 32;
/// The most one slice submits: the mover's state (and the status) is updated between slices,
/// and a stop request waits for one slice at most.
pub const SLICE_BYTES: u64 = 64 << 20;

#[derive(Debug)]
struct App {
    proc: ProcRef,
    opted_out: Option<&'static str>,
    history: Vec<Placement>,
    bucket: Bucket,
    /// Not due before this (monotonic ns).
    next_ns: u64,
    /// The migration in progress, for the placement that began at `.1`; stray pages left.
    work: Option<(Work, u64, u64)>,
    /// Counting passes made for the current placement.
    passes: u32,
    /// The placement (its `at_ns`) whose migration is over (done or given up).
    done_for: Option<u64>,
    /// Never acted on again (gone, or not permitted): why.
    stopped: Option<String>,
    /// An error was logged for it already.
    logged: bool,
    /// The current placement's wait was counted.
    deferred_for: Option<u64>,
    report: AppReport,
}

/// The mover's state.
#[derive(Debug)]
pub struct Mover<K: Kernel> {
    kernel: K,
    params: Params,
    online_nodes: usize,
    exclude: Vec<String>,
    page: usize,
    apps: BTreeMap<u32, App>,
    stats: Arc<Stats>,
}

impl<K: Kernel> Mover<K> {
    /// A mover over `online_nodes` nodes.
    pub fn new(
        kernel: K,
        params: Params,
        online_nodes: usize,
        exclude: Vec<String>,
        stats: Arc<Stats>,
    ) -> Self {
        Mover {
            kernel,
            params,
            online_nodes,
            exclude,
            page: partita_numa::page_size(),
            apps: BTreeMap::new(),
            stats,
        }
    }

    /// One round at `now_ns`: take in the new views (when the registry changed), then act
    /// on every application that is due. Returns when the next one is due (monotonic ns).
    pub fn round(&mut self, views: Option<&[View]>, now_ns: u64) -> u64 {
        self.stats.rounds.fetch_add(1, Ordering::Relaxed);
        if let Some(views) = views {
            self.take_views(views, now_ns);
        }
        let ids: Vec<u32> = self.apps.keys().copied().collect();
        let mut next = u64::MAX;
        for id in ids {
            let due = self.act(id, now_ns);
            next = next.min(due);
        }
        next
    }

    fn take_views(&mut self, views: &[View], now_ns: u64) {
        let ids: std::collections::BTreeSet<u32> = views.iter().map(|v| v.id).collect();
        self.apps.retain(|id, _| ids.contains(id));
        self.stats.forget(|id| ids.contains(&id));
        for v in views {
            let exclude = &self.exclude;
            let kernel = &self.kernel;
            let app = self.apps.entry(v.id).or_insert_with(|| App {
                proc: v.proc.clone(),
                opted_out: kernel.opted_out(v.proc.pid(), &v.name, exclude),
                history: Vec::new(),
                bucket: Bucket {
                    bytes: 0.0,
                    at_ns: now_ns,
                },
                next_ns: 0,
                work: None,
                passes: 0,
                done_for: None,
                stopped: None,
                logged: false,
                deferred_for: None,
                report: AppReport::default(),
            });
            let new = Placement {
                at_ns: now_ns,
                cpu_nodes: v.cpu_nodes.clone(),
            };
            // No CPU set: an application between two allocations (its target 0 for a moment)
            // or never confined; its memory stays where it belongs until it has CPUs again.
            if new.cpu_nodes.is_empty() && !app.history.is_empty() {
                continue;
            }
            match app.history.last_mut() {
                Some(last) if last.nodes() == new.nodes() => last.cpu_nodes = new.cpu_nodes,
                _ => {
                    if !app.history.is_empty() {
                        app.report.moves += 1;
                    }
                    tracing::debug!(pid = v.proc.pid(), nodes = ?new.nodes(), "numa-migrate: placement");
                    app.history.push(new);
                    if app.history.len() > HISTORY {
                        app.history.remove(0);
                    }
                    app.next_ns = 0;
                    app.passes = 0;
                }
            }
        }
    }

    /// Act on application `id` if due; returns when it is due next.
    fn act(&mut self, id: u32, now_ns: u64) -> u64 {
        let Some(app) = self.apps.get_mut(&id) else {
            return u64::MAX;
        };
        if app.stopped.is_some() || now_ns < app.next_ns {
            return app.next_ns;
        }
        let at = app.history.last().map_or(0, |p| p.at_ns);
        if app.work.as_ref().is_some_and(|w| w.1 != at) {
            app.work = None;
        }
        // At most: decide, count, decide, move (one slice), per round.
        for _ in 0..2 {
            let stray = match (&app.work, app.done_for == Some(at)) {
                (Some(w), _) => Some(w.2.max(1)),
                (None, true) => Some(0),
                (None, false) => None,
            };
            let facts = Facts {
                online_nodes: self.online_nodes,
                opted_out: app.opted_out,
                history: &app.history,
                stray_pages: stray,
                page_size: self.page as u64,
                now_ns,
                bucket: app.bucket,
            };
            let (d, bucket) = policy::decide(&self.params, &facts);
            app.bucket = bucket;
            let outcome = match d {
                Decision::Nothing(why) => {
                    app.report.state = nothing(why, app.report.moved_bytes);
                    app.next_ns = u64::MAX;
                    break;
                }
                Decision::Wait { until_ns } => {
                    if app.deferred_for != Some(at) {
                        app.deferred_for = Some(at);
                        self.stats.deferred.fetch_add(1, Ordering::Relaxed);
                    }
                    app.report.state = format!(
                        "waiting: the cost rule pays in {} ms",
                        until_ns.saturating_sub(now_ns).div_ceil(1_000_000)
                    );
                    app.next_ns = until_ns;
                    break;
                }
                Decision::Paced { until_ns } => {
                    app.next_ns = until_ns;
                    break;
                }
                Decision::Count => count(&self.kernel, &self.stats, app, at, self.online_nodes),
                Decision::Move { node, bytes } => {
                    app.report.state = format!("moving to node {node}");
                    self.stats.set_app(id, app.report.clone());
                    let r = move_slice(&self.kernel, &self.stats, app, bytes, self.page);
                    app.next_ns = now_ns;
                    r.map(|()| false)
                }
            };
            match outcome {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    failed(&self.stats, app, at, &e);
                    break;
                }
            }
        }
        self.stats.set_app(id, app.report.clone());
        app.next_ns
    }
}

/// The status text of a [`Decision::Nothing`].
fn nothing(why: Why, moved: u64) -> String {
    match why {
        Why::OneNode => "off: one NUMA node".into(),
        Why::OptedOut(w) => format!("off: {w}"),
        Why::NotConfined => "nothing to do: its CPUs span its nodes".into(),
        Why::NothingStray if moved > 0 => "done: its pages are on its nodes".into(),
        Why::NothingStray => "nothing to do: its pages are on its nodes".into(),
        Why::NeverPays => "off: a remote miss costs nothing extra".into(),
    }
}

/// Counts the stray pages of the current placement and starts the work over them (or marks
/// the placement done). `Ok(true)`: decide again now.
fn count(
    k: &dyn Kernel,
    stats: &Stats,
    app: &mut App,
    at: u64,
    online: usize,
) -> Result<bool, NumaError> {
    let Some(now) = app.history.last() else {
        return Ok(false);
    };
    let allowed = now.nodes();
    let node = now.main_node().unwrap_or(0);
    alive(app)?;
    stats.calls.fetch_add(1, Ordering::Relaxed);
    let t = std::time::Instant::now();
    let mappings = k.mappings(app.proc.pid() as u32)?;
    let stray = pages::stray_pages(&mappings, &allowed);
    app.passes += 1;
    tracing::debug!(
        pid = app.proc.pid(),
        stray,
        pass = app.passes,
        ms = t.elapsed().as_millis() as u64,
        "numa-migrate: counted"
    );
    // Two passes per placement at most: what the second leaves cannot move (shared, locked).
    if stray == 0 || app.passes > 2 || allowed.len() >= online {
        app.done_for = Some(at);
        app.work = None;
    } else {
        if app.passes == 1 {
            stats.migrations.fetch_add(1, Ordering::Relaxed);
        }
        app.work = Some((Work::new(&mappings, node, allowed), at, stray));
    }
    Ok(true)
}

/// One slice of the work, within `bytes` of budget (the unused part goes back).
fn move_slice(
    k: &dyn Kernel,
    stats: &Stats,
    app: &mut App,
    bytes: u64,
    page: usize,
) -> Result<(), NumaError> {
    alive(app)?;
    let Some((work, _, left)) = app.work.as_mut() else {
        return Ok(());
    };
    let mut calls = 0;
    let t = std::time::Instant::now();
    let budget_pages = bytes.min(SLICE_BYTES) / page as u64;
    let pid = app.proc.pid();
    let r = pages::slice(k, pid as u32, work, budget_pages, page, &mut calls);
    stats.calls.fetch_add(calls, Ordering::Relaxed);
    let s = r?;
    tracing::debug!(
        pid,
        stray = s.stray,
        moved = s.moved,
        failed = s.failed,
        calls = s.calls,
        query_ms = s.us[0] / 1000,
        move_ms = s.us[1] / 1000,
        verify_ms = s.us[2] / 1000,
        ms = t.elapsed().as_millis() as u64,
        "numa-migrate: slice"
    );
    // The budget is charged for what was submitted: the unused part goes back, an overshoot
    // (the last query chunk) is owed.
    app.bucket.bytes += bytes as f64 - (s.stray * page as u64) as f64;
    *left = left.saturating_sub(s.stray);
    let moved = s.moved * page as u64;
    app.report.moved_bytes += moved;
    stats.moved_bytes.fetch_add(moved, Ordering::Relaxed);
    if s.stray > 0 && s.moved == 0 {
        if let Some(errno) = s.first_error {
            // Nothing of this slice moved (the destination full, typically): give up.
            return Err(NumaError::Os {
                call: "move_pages",
                source: std::io::Error::from_raw_os_error(errno),
            });
        }
    }
    if work.finished() {
        app.work = None; // the next round counts again (a second pass, or done)
    }
    Ok(())
}

/// `ESRCH` when the process has exited (its pidfd says so): its pid may name another
/// process by now, so nothing is asked of the kernel about it.
fn alive(app: &App) -> Result<(), NumaError> {
    if app.proc.alive() {
        Ok(())
    } else {
        Err(NumaError::Os {
            call: "pidfd",
            source: std::io::Error::from_raw_os_error(libc::ESRCH),
        })
    }
}

/// Whether the process has exited, or does within `ms` milliseconds (pidfd poll).
fn exited_within(proc: &ProcRef, ms: u16) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(proc.pidfd().as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(ready) => ready > 0,
        Err(_) => !proc.alive(),
    }
}

/// A failed call: gone or not permitted stops the application for good, anything else ends
/// this placement's migration. Logged once per application.
fn failed(stats: &Stats, app: &mut App, at: u64, e: &NumaError) {
    stats.errors.fetch_add(1, Ordering::Relaxed);
    let errno = match e {
        NumaError::Os { source, .. } => source.raw_os_error(),
        _ => None,
    };
    // An exiting process has no memory map left before its pidfd says it exited:
    // move_pages answers EINVAL then; give it a moment to finish exiting.
    let gone = errno == Some(libc::ESRCH)
        || errno == Some(libc::ENOENT) && e.call().contains("/proc")
        || exited_within(&app.proc, if errno == Some(libc::EINVAL) { 100 } else { 0 });
    let pid = app.proc.pid();
    let state = if gone {
        "exited".to_string()
    } else {
        format!("failed: {e}")
    };
    if !app.logged {
        app.logged = true;
        if gone {
            tracing::info!(
                pid,
                "numa-migrate: the application exited during its migration"
            );
        } else {
            tracing::warn!(pid, error = %e, "numa-migrate: cannot move the application's pages (not retried for this placement)");
        }
    } else {
        tracing::debug!(pid, error = %e, "numa-migrate: failed again");
    }
    if gone || matches!(errno, Some(libc::EPERM | libc::EACCES)) {
        app.stopped = Some(state.clone());
    }
    app.done_for = Some(at);
    app.work = None;
    app.next_ns = u64::MAX;
    app.report.state = state;
}

#[cfg(test)]
#[path = "mover_tests.rs"]
mod tests;

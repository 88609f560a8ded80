//! The manager's state: registered applications, processes started with `partita run`, the
//! allocator's history, and the reallocation that turns them into published pages and CPU
//! sets. Synchronous and lock-protected; the daemon's tasks call into it. Beside it: the
//! status snapshot (`snapshot`), the bandwidth policy's plumbing (`bandwidth`), the page
//! mover's views (`memory`) and the partitions made from cgroups (`cgroups`).

use crate::alloc::{self, AllocInput, AllocOutput, AppDemand, AppId, History};
use crate::config::{Config, Control, PartitionConfig, PolicyKind, Uncontrolled};
use crate::proc_ref::ProcRef;
use crate::realloc::{self, AppView, Batch, Effect, PlanInput};
use crate::sys;
use partita_protocol::page::{monotonic_ns, PageMap};
use partita_protocol::wire::ErrorCode;
use partita_protocol::CpuSet;
use std::collections::BTreeMap;
mod bandwidth;
mod cgroups;
mod memory;
mod nodes;
mod snapshot;

/// Who is on the other end of a connection (kernel credentials and a pidfd).
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    /// The peer's process.
    pub proc: ProcRef,
    /// Its uid.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
}
use std::os::fd::OwnedFd;
use std::sync::{atomic::Ordering, Arc};
use std::time::{Duration, Instant};

/// A registered application.
#[derive(Debug)]
struct App {
    id: AppId,
    pid: i32,
    proc: ProcRef,
    uid: u32,
    name: String,
    partition: usize,
    pool_size: u32,
    partition_only: bool,
    /// A build served by `partita run --jobserver`: its page's `active` is the tokens out.
    jobserver: bool,
    page: Arc<PageMap>,
    published: Option<(u32, CpuSet)>,
    /// Its published CPUs are its partition's, time-shared (`realloc::plan::Share`).
    shared: bool,
    /// The outside load was counted again after it registered ([`Registry::counted`]):
    /// until then no round plans it (it runs at full size).
    counted: bool,
    /// Allocations published to it so far.
    allocations: u64,
    /// When its pending revocation was published (monotonic ns; `realloc::plan::handover`).
    revoked_at: Option<u64>,
}

/// A process started with `partita run`.
#[derive(Debug, Clone)]
struct Tracked {
    pid: i32,
    uid: u32,
    proc: ProcRef,
    partition: usize,
    /// Its first confinement is done (by the `partita run` request that tracked it); until
    /// then reallocations leave it alone, so that a process about to move into a partition
    /// cgroup never has its affinity narrowed (a manager killed in between could not undo it).
    confined: bool,
}

/// Runnable-thread measurements of a partition's uncontrolled processes.
#[derive(Debug, Clone, Copy, Default)]
struct Runnable {
    now: u32,
    avg: f64,
}

/// Who asks to register (identity from SO_PEERCRED, the rest from the hello).
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    /// The peer's pid (from the socket, never from a message).
    pub pid: i32,
    /// The peer's pidfd (from the socket).
    pub proc: ProcRef,
    /// The peer's uid.
    pub uid: u32,
    /// The peer's gid.
    pub gid: u32,
    /// Application name from the hello.
    pub name: String,
    /// Partition hint from the hello (empty: none).
    pub hint: String,
    /// Worker threads in its pool.
    pub pool_size: u32,
    /// The hello's partition-only flag.
    pub partition_only: bool,
    /// The hello's jobserver flag (a build whose jobs take tokens).
    pub jobserver: bool,
}

/// The daemon's periods, from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Periods {
    /// How long a client may stay silent before its first message.
    pub hello_timeout: Duration,
    /// Runnable-thread sampling of uncontrolled processes.
    pub sample: Duration,
    /// The periodic reallocation tick: the shortest of the reallocation period and the
    /// periods of the policies some partition uses.
    pub tick: Duration,
}

/// What the sampler measures outside the lock.
#[derive(Debug, Clone)]
pub(crate) struct SampleRequest {
    /// (partition, pid, alive by its pidfd) of every tracked process.
    pub tracked: Vec<(usize, i32, bool)>,
    /// Pids of the registered applications, and whether the application's process tree is
    /// its own (a jobserver build: its jobs run on its tokens, so they are not outside load).
    pub app_pids: Vec<(i32, bool)>,
    /// Number of partitions.
    pub partitions: usize,
    /// Whether the default partition counts every runnable thread of the system.
    pub system_wide: bool,
    /// Partition names, by index (to find a partition's cgroup).
    pub names: Vec<String>,
}

/// Everything behind the manager's lock.
#[derive(Debug)]
pub(crate) struct Registry {
    config: Config,
    partitions: Vec<PartitionConfig>,
    cpus: Vec<usize>,
    domains: Vec<u32>,
    /// NUMA node of each CPU (indexed like `cpus`).
    nodes: Vec<u32>,
    managed: CpuSet,
    apps: BTreeMap<AppId, App>,
    next_id: AppId,
    tracked: Vec<Tracked>,
    runnable: Vec<Runnable>,
    history: History,
    last: AllocOutput,
    uncontrolled_sets: Vec<CpuSet>,
    reallocations: u64,
    /// Sampling rounds done ([`Registry::update_runnable`]).
    samples: u64,
    /// Processes of departed applications, restored by the next batch.
    departed: Vec<ProcRef>,
    /// The enforcer's mechanism, for the status.
    confinement: &'static str,
    start: Instant,
    /// Whether the manager may set affinities of other users' processes.
    privileged: bool,
    euid: u32,
    /// Bandwidth policy: counters, per-quantum selection, parked applications.
    bandwidth: crate::quantum::Bandwidth,
    /// Moves, revocations, latency, refusals (the metrics endpoint's counters).
    pub(crate) telemetry: crate::telemetry::Telemetry,
    cgroups: cgroups::CgroupPartitions,
}

impl Registry {
    pub(crate) fn new(config: Config, managed: CpuSet, confinement: &'static str) -> Registry {
        let partitions = config.partition_list();
        let cpus = managed.to_vec();
        let topo = crate::hardware::cpu_topology(&cpus);
        let (domains, nodes) = (topo.llcs, topo.nodes);
        let bandwidth = crate::quantum::Bandwidth::new(&config, &partitions);
        let n = partitions.len();
        let euid = sys::euid();
        Registry {
            cgroups: cgroups::CgroupPartitions::new(&config, n),
            config,
            partitions,
            cpus,
            domains,
            nodes,
            managed,
            apps: BTreeMap::new(),
            next_id: 1,
            tracked: Vec::new(),
            runnable: vec![Runnable::default(); n],
            history: History::default(),
            last: AllocOutput::default(),
            uncontrolled_sets: vec![CpuSet::new(); n],
            reallocations: 0,
            samples: 0,
            departed: Vec::new(),
            confinement,
            start: Instant::now(),
            privileged: euid == 0,
            euid,
            bandwidth,
            telemetry: Default::default(),
        }
    }

    /// The daemon's periods.
    pub(crate) fn periods(&self) -> Periods {
        let c = &self.config;
        let uses =
            |k: PolicyKind| self.partitions.iter().any(|p| p.policy == k) || self.cgroups.uses(k);
        // A policy's period counts only where a partition uses it: a 100 ms DSS quantum
        // nobody uses would triple the rounds of every equipartition manager for nothing.
        let mut tick = c.realloc_period_ms;
        if uses(PolicyKind::UsageDecay) {
            tick = tick.min(c.usage_decay.period_ms);
        }
        if uses(PolicyKind::Dss) {
            tick = tick.min(c.dss.quantum_ms);
        }
        let tick = tick.max(1);
        Periods {
            hello_timeout: Duration::from_millis(c.hello_timeout_ms),
            sample: Duration::from_millis(c.sample_period_ms),
            tick: Duration::from_millis(tick),
        }
    }

    /// The CPUs this manager hands out.
    pub(crate) fn managed(&self) -> CpuSet {
        self.managed
    }

    /// Forget every application (shutdown; the caller restores affinities).
    pub(crate) fn shutdown(&mut self) {
        self.apps.clear();
    }

    /// The welcome for a registered application: its partition's name and a copy of its
    /// page's fd. `None` if it is gone.
    pub(crate) fn welcome(&self, id: AppId) -> Option<std::io::Result<(String, OwnedFd)>> {
        let app = self.apps.get(&id)?;
        let partition = self.partitions[app.partition].name.clone();
        Some(app.page.fd().try_clone_to_owned().map(|fd| (partition, fd)))
    }

    /// Track the calling process as uncontrolled in the partition named `partition`
    /// (`partita run`); returns the partition's index. "When one appears it gets one CPU at
    /// once": the caller requests a round, waits for it, then confines the process
    /// to [`Registry::uncontrolled_set`] (and calls [`Registry::untrack`] if it cannot).
    /// The partition must admit the caller as a member (its hint rule, uid or gid; `default`
    /// admits everyone), the caller must be one this manager serves, and at most
    /// `max_applications` processes are tracked.
    pub(crate) fn confine(
        &mut self,
        peer: &Peer,
        partition: &str,
    ) -> Result<usize, (ErrorCode, String)> {
        if !self.privileged && peer.uid != self.euid {
            return Err((
                ErrorCode::PermissionDenied,
                format!("this manager serves uid {} only", self.euid),
            ));
        }
        let k = self.partition_index(partition).ok_or_else(|| {
            (
                ErrorCode::UnknownPartition,
                format!("no partition named {partition:?}"),
            )
        })?;
        let m = &self.partitions[k].members;
        if k != 0 && !m.hint && !m.uids.contains(&peer.uid) && !m.gids.contains(&peer.gid) {
            return Err((
                ErrorCode::PermissionDenied,
                format!(
                    "partition {partition:?} does not admit uid {} / gid {}",
                    peer.uid, peer.gid
                ),
            ));
        }
        self.tracked.retain(|t| t.proc.alive());
        let already = self.tracked.iter().any(|t| t.pid == peer.proc.pid());
        if !already && self.tracked.len() >= self.config.max_applications {
            return Err((
                ErrorCode::TooManyApplications,
                format!(
                    "the manager already tracks {} processes (max_applications)",
                    self.tracked.len()
                ),
            ));
        }
        let pid = peer.proc.pid();
        self.tracked.retain(|t| t.pid != pid);
        self.tracked.push(Tracked {
            pid,
            uid: peer.uid,
            proc: peer.proc.clone(),
            partition: k,
            confined: false,
        });
        let r = &mut self.runnable[k];
        r.now = r.now.max(1);
        Ok(k)
    }

    /// `pid`'s first confinement is done: later reallocations move it with its partition.
    /// Returns the partition's uncontrolled set now, which the caller re-applies if it changed
    /// meanwhile.
    pub(crate) fn mark_confined(&mut self, pid: i32, k: usize) -> (String, CpuSet) {
        for t in self.tracked.iter_mut().filter(|t| t.pid == pid) {
            t.confined = true;
        }
        self.uncontrolled_set(k)
    }

    /// A partition's name and the CPU set its uncontrolled processes get now (all managed
    /// CPUs if the allocation gave them none).
    pub(crate) fn uncontrolled_set(&self, k: usize) -> (String, CpuSet) {
        let mut set = self.uncontrolled_sets[k];
        if set.is_empty() {
            set = self.managed;
        }
        (self.partitions[k].name.clone(), set)
    }

    /// Count a refusal (connection limits, identity, registration, confinement): the metrics'
    /// counter, which status reads too.
    pub(crate) fn count_refusal(&mut self, code: ErrorCode) {
        self.telemetry
            .count_refusal::<()>(&Err((code, String::new())));
    }

    /// What the sampler must measure.
    pub(crate) fn sample_request(&self) -> SampleRequest {
        SampleRequest {
            tracked: self
                .tracked
                .iter()
                .map(|t| (t.partition, t.pid, t.proc.alive()))
                .collect(),
            app_pids: self.apps.values().map(|a| (a.pid, a.jobserver)).collect(),
            partitions: self.partitions.len(),
            system_wide: self.config.uncontrolled == Uncontrolled::System,
            names: self.partitions.iter().map(|p| p.name.clone()).collect(),
        }
    }

    /// Index of a partition by name (empty: default).
    fn partition_index(&self, name: &str) -> Option<usize> {
        if name.is_empty() {
            return Some(0);
        }
        self.partitions.iter().position(|p| p.name == name)
    }

    /// Where an application goes: its hint if the partition admits hints, else the first
    /// partition whose rule matches, else `default`.
    fn choose_partition(
        &self,
        name: &str,
        uid: u32,
        gid: u32,
        hint: &str,
    ) -> Result<usize, (ErrorCode, String)> {
        if !hint.is_empty() {
            return match self.partition_index(hint) {
                Some(k) if self.partitions[k].members.hint || k == 0 => Ok(k),
                Some(_) => Err((
                    ErrorCode::PermissionDenied,
                    format!("partition {hint:?} does not admit applications by hint"),
                )),
                None => Err((
                    ErrorCode::UnknownPartition,
                    format!("no partition named {hint:?}"),
                )),
            };
        }
        for (k, p) in self.partitions.iter().enumerate().skip(1) {
            let m = &p.members;
            if m.names.iter().any(|n| n == name) || m.uids.contains(&uid) || m.gids.contains(&gid) {
                return Ok(k);
            }
        }
        Ok(0)
    }

    /// Register an application (identity from SO_PEERCRED) and give it a page. Its page says
    /// "your whole pool, no confinement" until the next reallocation, which the caller requests:
    /// registration never waits for one.
    pub(crate) fn register(&mut self, req: Registration) -> Result<AppId, (ErrorCode, String)> {
        self.admit(&req)?;
        let partition = self.place(req.pid, &req.name, req.uid, req.gid, &req.hint)?;
        let id = self.next_id;
        // Ids are never reused within one manager: at the end of the range, refuse.
        let next = self.next_id.checked_add(1).ok_or((
            ErrorCode::TooManyApplications,
            "application ids are exhausted; restart the manager".to_string(),
        ))?;
        let page = PageMap::create(id, req.pool_size)
            .map_err(|e| (ErrorCode::Internal, format!("control page: {e}")))?;
        let partition_only = req.partition_only || self.config.control == Control::PartitionOnly;
        page.manager
            .partition_only
            .store(partition_only as u32, Ordering::Relaxed);
        let period = crate::quantum::report_period_us(
            self.partitions[partition].policy,
            self.config.bandwidth.quantum_ms,
        );
        page.manager
            .report_period_us
            .store(period, Ordering::Relaxed);
        // Until the application reports, assume it wants its whole pool.
        page.app.demand.store(req.pool_size, Ordering::Relaxed);
        page.app.heartbeat.store(monotonic_ns(), Ordering::Relaxed);
        self.next_id = next;
        self.apps.insert(
            id,
            App {
                id,
                pid: req.pid,
                proc: req.proc,
                uid: req.uid,
                name: req.name,
                partition,
                pool_size: req.pool_size,
                partition_only,
                jobserver: req.jobserver,
                page: Arc::new(page),
                published: None,
                shared: false,
                counted: false,
                allocations: 0,
                revoked_at: None,
            },
        );
        Ok(id)
    }

    /// Refuse another user's process (unless privileged), a full manager, a second
    /// registration of the same process.
    fn admit(&self, req: &Registration) -> Result<(), (ErrorCode, String)> {
        if !self.privileged && req.uid != self.euid {
            return Err((
                ErrorCode::PermissionDenied,
                format!("this manager serves uid {} only", self.euid),
            ));
        }
        if !req.proc.alive() {
            return Err((
                ErrorCode::PermissionDenied,
                format!("process {} has exited", req.pid),
            ));
        }
        if self.apps.len() >= self.config.max_applications {
            return Err((
                ErrorCode::TooManyApplications,
                format!(
                    "the manager already has {} applications (max_applications)",
                    self.apps.len()
                ),
            ));
        }
        if self.apps.values().any(|a| a.pid == req.pid) {
            return Err((
                ErrorCode::OutOfOrder,
                format!("process {} is already registered", req.pid),
            ));
        }
        Ok(())
    }

    /// The outside load was counted again after `id` registered: rounds plan it from now on.
    pub(crate) fn counted(&mut self, id: AppId) {
        if let Some(a) = self.apps.get_mut(&id) {
            a.counted = true;
        }
    }

    /// Remove an application; the next batch restores its affinity if it still runs.
    pub(crate) fn unregister(&mut self, id: AppId) {
        if let Some(app) = self.apps.remove(&id) {
            self.departed.push(app.proc.clone());
        }
        self.drop_empty_cgroup_partitions();
    }

    /// One reallocation's planning half, under the lock: compute the [`realloc::plan`],
    /// record what it publishes, and return its effects resolved for [`realloc::apply`].
    pub(crate) fn plan(&mut self) -> Batch {
        let started = Instant::now();
        self.bandwidth_top_up();
        let input = self.plan_input();
        let plan = realloc::plan(&input, &mut self.history);
        self.reallocations += 1;
        let mut batch = Batch {
            restore: std::mem::take(&mut self.departed),
            recheck_at: plan.recheck_at,
            ..Batch::default()
        };
        for a in self.apps.values_mut() {
            a.revoked_at = plan.revoked.get(&a.id).copied();
        }
        for effect in plan.effects {
            match effect {
                Effect::Publish {
                    app,
                    target,
                    cpus,
                    shared,
                } => {
                    if let Some(a) = self.apps.get_mut(&app) {
                        a.published = Some((target, cpus));
                        a.shared = shared;
                        a.allocations += 1;
                        let end = self.bandwidth.quantum_end(a.id);
                        batch.publish.push((a.page.clone(), target, cpus, end));
                    }
                }
                Effect::Affinity { app, cpus } => {
                    if let Some(a) = self.apps.get(&app) {
                        batch.affinity.push((a.proc.clone(), cpus));
                    }
                }
                Effect::Uncontrolled { partition, cpus } => {
                    self.uncontrolled_sets[partition] = cpus;
                    let procs: Vec<ProcRef> = self
                        .tracked
                        .iter()
                        .filter(|t| t.partition == partition && t.confined)
                        .map(|t| t.proc.clone())
                        .collect();
                    if !procs.is_empty() {
                        let name = self.partitions[partition].name.clone();
                        batch.uncontrolled.push((name, procs, cpus));
                    }
                }
            }
        }
        tracing::trace!(
            moves = plan.allocation.moves,
            total = plan.allocation.total(),
            "reallocated"
        );
        // The latency recorded is the planning half (the lock's hold time); applying follows
        // outside the lock.
        self.telemetry.reallocated(
            started.elapsed(),
            &input.alloc,
            &self.last,
            &plan.allocation,
        );
        self.last = plan.allocation;
        batch
    }

    /// The plan's input: CPUs, partitions, demands read from the pages now, what each page
    /// says.
    fn plan_input(&self) -> PlanInput {
        let n = self.partitions.len();
        let mut alloc = AllocInput::new(self.cpus.clone(), self.partitions.clone());
        alloc.domains = self.domains.clone();
        alloc.nodes = self.nodes.clone();
        alloc.now_ms = self.start.elapsed().as_millis() as u64;
        alloc.period_ms = self.config.realloc_period_ms;
        alloc.usage_decay = self.config.usage_decay.clone();
        alloc.dss = self.config.dss.clone();
        alloc.bounds = self.cgroups.bounds();
        alloc.uncontrolled = (0..n)
            .map(|k| alloc::uncontrolled_demand(self.runnable[k].now, self.runnable[k].avg))
            .collect();
        let mut apps = Vec::with_capacity(self.apps.len());
        for app in self.apps.values().filter(|a| a.counted) {
            let demand = app.page.app.demand.load(Ordering::Relaxed);
            // A parked application (bandwidth policy's zero quantum) asks for nothing.
            let demand = self.bandwidth.demand(app.id, demand);
            alloc.apps.push(AppDemand {
                id: app.id,
                partition: app.partition,
                demand,
                pool_size: app.pool_size,
            });
            apps.push(AppView {
                id: app.id,
                partition: app.partition,
                pool_size: app.pool_size,
                partition_only: app.partition_only,
                may_confine: self.privileged || app.uid == self.euid,
                published: app.published,
                shared: app.shared,
                demand: app.page.app.demand.load(Ordering::Relaxed),
                // A jobserver build's `active` counts tokens, not workers that park.
                active: (!app.partition_only && !app.jobserver)
                    .then(|| app.page.app.active.load(Ordering::Relaxed)),
                revoked_at: app.revoked_at,
            });
        }
        PlanInput {
            alloc,
            apps,
            managed: self.managed,
            uncontrolled_sets: self.uncontrolled_sets.clone(),
            now_ns: monotonic_ns(),
            handover_ns: self.config.handover_us.saturating_mul(1000),
            min_target: self.config.min_target,
        }
    }

    /// Take new runnable measurements (computed outside the lock); returns whether any
    /// partition's uncontrolled demand changed.
    pub(crate) fn update_runnable(&mut self, now: &[u32], alpha: f64) -> bool {
        self.samples += 1;
        let mut changed = false;
        for (k, &x) in now.iter().enumerate().take(self.runnable.len()) {
            let r = &mut self.runnable[k];
            let before = alloc::uncontrolled_demand(r.now, r.avg);
            r.avg = r.avg * (1.0 - alpha) + x as f64 * alpha;
            r.now = x;
            changed |= before != alloc::uncontrolled_demand(r.now, r.avg);
        }
        changed
    }

    /// A fresh count of the default partition's outside runnable threads at nice ≤ 0
    /// (`fresh`, taken after an application registered, so its own threads are no longer in
    /// it): the count and its average drop to it. Until it registered, the newcomer's threads
    /// were outside ones, and the last sample may also have seen a process that has exited
    /// since; neither may cost the newcomer its first allocation (issue 26: "registration is
    /// free"). Only lowers.
    pub(crate) fn lower_outside(&mut self, fresh: u32) {
        if let Some(r) = self.runnable.first_mut() {
            let to = r.now.min(fresh);
            tracing::trace!(fresh, was = r.now, to, "outside load counted again");
            if to < r.now {
                r.avg = r.avg.min(f64::from(to));
            }
            r.now = to;
        }
    }

    /// Stop tracking these processes (they exited: the sampler found their process trees
    /// empty). Returns whether any was tracked.
    pub(crate) fn untrack(&mut self, gone: &[i32]) -> bool {
        let before = self.tracked.len();
        self.tracked.retain(|t| !gone.contains(&t.pid));
        before != self.tracked.len()
    }
}

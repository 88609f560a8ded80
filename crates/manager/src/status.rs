//! What `partita status` shows (and `--json` prints): a snapshot of the manager's registry and
//! last allocation.

use crate::config::{Control, PolicyKind, Sharing};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The manager's state at one instant.
///
/// ```
/// let s = partita_manager::Status::default();
/// let json = serde_json::to_string(&s).unwrap();
/// assert_eq!(serde_json::from_str::<partita_manager::Status>(&json).unwrap(), s);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Status {
    /// Wall-clock time of the snapshot, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// `full` or `partition-only`.
    pub control: Control,
    /// CPUs the manager manages (its own affinity / cpuset, minus configuration).
    pub cpus: Vec<usize>,
    /// Number of CPUs managed.
    pub cpus_managed: usize,
    /// Reallocations done since start.
    pub reallocations: u64,
    /// Sampling rounds since start: each counts outside load and puts back inside its CPUs
    /// every thread of a confined process that left them (threads created since included).
    #[serde(default)]
    pub samples: u64,
    /// CPU moves in the last reallocation.
    pub last_moves: u32,
    /// How uncontrolled processes are confined: `cgroup-v2`, `cgroup-v1` or `affinity`.
    pub confinement: String,
    /// Partitions, `default` first.
    pub partitions: Vec<PartitionStatus>,
    /// Registered applications (a non-root caller sees only its own).
    pub applications: Vec<AppStatus>,
    /// Connections refused since start, per error code.
    #[serde(default)]
    pub refusals: std::collections::BTreeMap<String, u64>,
    /// The page mover's counters (memory follows CPUs; [`crate::memfollow`]).
    #[serde(default)]
    pub memory: MemoryStatus,
}

/// The page mover's counters since start ([`crate::memfollow::Totals`]).
///
/// ```
/// assert!(!partita_manager::status::MemoryStatus::default().running);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct MemoryStatus {
    /// Whether the mover runs (enabled, and the machine has several NUMA nodes).
    pub running: bool,
    /// NUMA nodes online.
    pub nodes: usize,
    /// System calls made on applications' memory (`move_pages`, `numa_maps` reads).
    pub calls: u64,
    /// Bytes moved.
    pub moved_bytes: u64,
    /// Placements whose memory started to move.
    pub migrations: u64,
    /// Placements the cost rule made wait.
    pub deferred: u64,
    /// Failed calls.
    pub errors: u64,
}

/// One partition.
///
/// ```
/// let p = partita_manager::status::PartitionStatus { name: "batch".into(), ..Default::default() };
/// assert_eq!(p.allocation, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PartitionStatus {
    /// Name.
    pub name: String,
    /// Share (weight).
    pub share: u32,
    /// Fixed CPU count, if configured.
    pub fixed_cpus: Option<u32>,
    /// Sharing policy.
    pub sharing: Sharing,
    /// Level-2 policy.
    pub policy: PolicyKind,
    /// CPUs it is entitled to.
    pub entitlement: u32,
    /// Σ member demand (capped by pool sizes).
    pub demand: u32,
    /// CPUs it has.
    pub allocation: u32,
    /// Entitled CPUs others use.
    pub lent: u32,
    /// CPUs above its entitlement.
    pub borrowed: u32,
    /// Uncontrolled processes: runnable threads now.
    pub uncontrolled_runnable: u32,
    /// Uncontrolled processes: runnable-thread average.
    pub uncontrolled_average: f64,
    /// Uncontrolled processes: CPUs they are given.
    pub uncontrolled_cpus: Vec<usize>,
    /// Processes started in it with `partita run`.
    pub uncontrolled_pids: Vec<i32>,
    /// Counter source of the bandwidth policy (`perf-event`, `resctrl`, `self-report`, or
    /// `none`: not a bandwidth partition, or no source usable).
    #[serde(default)]
    pub counter_source: String,
    /// Counter sources skipped, each `name: reason`.
    #[serde(default)]
    pub counter_skipped: Vec<String>,
    /// The bandwidth policy's state (variant, quantum, capacity; why it degraded); empty for
    /// other policies.
    #[serde(default)]
    pub bandwidth: String,
    /// The cgroup this partition was made from (a Slurm job, a pod, a slice; hierarchy-
    /// relative), empty for a configured partition.
    #[serde(default)]
    pub cgroup: String,
    /// The CPUs that cgroup allows (its effective cpuset); empty for a configured partition.
    #[serde(default)]
    pub cgroup_cpus: Vec<usize>,
}

/// One registered application.
///
/// ```
/// let a = partita_manager::status::AppStatus { pid: 42, ..Default::default() };
/// assert!(a.cpus.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AppStatus {
    /// Manager-assigned id.
    pub id: u32,
    /// Process id (from SO_PEERCRED).
    pub pid: i32,
    /// User id (from SO_PEERCRED).
    pub uid: u32,
    /// Name from the hello.
    pub name: String,
    /// Partition.
    pub partition: String,
    /// Pool size.
    pub pool_size: u32,
    /// Reported demand.
    pub demand: u32,
    /// Target published.
    pub target: u32,
    /// Its `cpus` are its partition's, time-shared with their owners: the rotation gave it
    /// none of its own this period and `min_target` keeps one worker running.
    #[serde(default)]
    pub shared: bool,
    /// Allocations published to it since it registered (its first is the one it was
    /// welcomed with).
    #[serde(default)]
    pub allocations: u64,
    /// Active workers reported.
    pub active: u32,
    /// CPU set published.
    pub cpus: Vec<usize>,
    /// NUMA nodes of those CPUs (more than one only when its count does not fit in a node
    /// or the nodes are full).
    #[serde(default)]
    pub nodes: Vec<u32>,
    /// Level-2 policy of its partition.
    pub policy: PolicyKind,
    /// The counter source its rate comes from (`perf-event`, `resctrl`, `self-report`;
    /// `none` outside bandwidth partitions).
    pub counter_source: String,
    /// Whether its runtime measures its own traffic (what `self-report` carries besides the
    /// bytes it reports), or why not: `measured llc-misses`, `measured-skip no-pmu`, … (the
    /// names of `partita_protocol::traffic::TrafficStatus`); empty when not reported.
    #[serde(default)]
    pub runtime_traffic: String,
    /// Estimated memory traffic (GB/s), bandwidth partitions only.
    #[serde(default)]
    pub rate_gbps: Option<f64>,
    /// Whether it has a zero quantum now (bandwidth policy).
    #[serde(default)]
    pub parked: bool,
    /// Tasks run (reported).
    pub tasks_run: u64,
    /// Milliseconds since its last heartbeat.
    pub heartbeat_age_ms: u64,
    /// For a build under `partita run --jobserver`: the jobserver tokens in circulation (its
    /// jobs running at once, beyond the one each client runs without a token).
    #[serde(default)]
    pub jobserver_tokens: Option<u32>,
    /// Its resident pages per NUMA node (`/proc/<pid>/numa_maps`, read when the status is
    /// taken, on machines with several nodes; empty otherwise or when unreadable).
    #[serde(default)]
    pub pages_per_node: std::collections::BTreeMap<u32, u64>,
    /// Node-set changes of its CPUs the page mover saw.
    #[serde(default)]
    pub memory_moves: u64,
    /// Bytes of its memory the manager moved after its CPUs.
    #[serde(default)]
    pub memory_moved_bytes: u64,
    /// What the page mover is doing for it, or why nothing (`off: PARTITA_NUMA=off`, …).
    #[serde(default)]
    pub memory_migration: String,
}

impl AppStatus {
    /// The COUNTERS cell of `partita status`: the source, the runtime's own measurement, the
    /// estimated rate and whether it is parked.
    ///
    /// ```
    /// let a = partita_manager::status::AppStatus {
    ///     counter_source: "self-report".into(),
    ///     runtime_traffic: "measured-skip no-pmu".into(),
    ///     rate_gbps: Some(1.5),
    ///     ..Default::default()
    /// };
    /// assert_eq!(a.counters_cell(), "self-report (runtime: measured-skip no-pmu) 1.500 GB/s");
    /// ```
    pub fn counters_cell(&self) -> String {
        let mut s = self.counter_source.clone();
        if !self.runtime_traffic.is_empty() {
            s += &format!(" (runtime: {})", self.runtime_traffic);
        }
        if let Some(r) = self.rate_gbps {
            s += &format!(" {r:.3} GB/s{}", if self.parked { " parked" } else { "" });
        }
        s
    }
}

impl Status {
    /// The application with this pid, if registered.
    ///
    /// ```
    /// assert!(partita_manager::Status::default().app_by_pid(1).is_none());
    /// ```
    pub fn app_by_pid(&self, pid: i32) -> Option<&AppStatus> {
        self.applications.iter().find(|a| a.pid == pid)
    }

    /// The partition with this name.
    ///
    /// ```
    /// assert!(partita_manager::Status::default().partition("default").is_none());
    /// ```
    pub fn partition(&self, name: &str) -> Option<&PartitionStatus> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// Human-readable tables.
    ///
    /// ```
    /// let t = partita_manager::Status::default().to_table();
    /// assert!(t.contains("PARTITION"));
    /// let mut s = partita_manager::Status::default();
    /// s.applications.push(partita_manager::status::AppStatus { nodes: vec![0, 1], ..Default::default() });
    /// assert!(s.to_table().contains("NODES") && s.to_table().contains(" 0,1 "));
    /// assert!(!s.to_table().contains("PAGES PER NODE")); // the mover is off, nothing read
    /// s.memory.running = true;
    /// s.applications[0].pages_per_node = [(0, 3), (1, 9)].into_iter().collect();
    /// s.applications[0].memory_migration = "moving to node 1".into();
    /// let t = s.to_table();
    /// assert!(t.contains("PAGES PER NODE") && t.contains("0:3 1:9") && t.contains("moving to node 1"));
    /// ```
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let cpus: partita_protocol::CpuSet = self.cpus.iter().copied().collect();
        let _ = writeln!(
            s,
            "CPUs managed: {} ({})   control: {:?}   confinement: {}   reallocations: {}   last moves: {}",
            self.cpus_managed, cpus, self.control, self.confinement, self.reallocations, self.last_moves
        );
        let _ = writeln!(s);
        self.partitions_table(&mut s);
        let _ = writeln!(s);
        self.applications_table(&mut s);
        s
    }

    /// The partition rows of [`Status::to_table`], with each one's bandwidth line.
    fn partitions_table(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "{:<16} {:>5} {:>11} {:>6} {:>10} {:>4} {:>8} {:>7} {:<14} UNCONTROLLED",
            "PARTITION",
            "SHARE",
            "ENTITLEMENT",
            "DEMAND",
            "ALLOCATION",
            "LENT",
            "BORROWED",
            "SHARING",
            "POLICY"
        );
        for p in &self.partitions {
            let share = match p.fixed_cpus {
                Some(n) => format!("{n}cpu"),
                None => p.share.to_string(),
            };
            let uc: partita_protocol::CpuSet = p.uncontrolled_cpus.iter().copied().collect();
            let _ = writeln!(
                s,
                "{:<16} {:>5} {:>11} {:>6} {:>10} {:>4} {:>8} {:>7} {:<14} runnable {} avg {:.1} cpus [{}] pids {:?}",
                p.name,
                share,
                p.entitlement,
                p.demand,
                p.allocation,
                p.lent,
                p.borrowed,
                format!("{:?}", p.sharing).to_lowercase(),
                p.policy.to_string(),
                p.uncontrolled_runnable,
                p.uncontrolled_average,
                uc,
                p.uncontrolled_pids
            );
            if !p.bandwidth.is_empty() {
                let _ = writeln!(
                    s,
                    "  {} bandwidth: {}; counters: {}{}",
                    p.name,
                    p.bandwidth,
                    p.counter_source,
                    if p.counter_skipped.is_empty() {
                        String::new()
                    } else {
                        format!(" (skipped: {})", p.counter_skipped.join("; "))
                    }
                );
            }
            if !p.cgroup.is_empty() {
                let cpus: partita_protocol::CpuSet = p.cgroup_cpus.iter().copied().collect();
                let _ = writeln!(s, "  {} cgroup: {} cpus [{cpus}]", p.name, p.cgroup);
            }
        }
    }

    /// The application rows of [`Status::to_table`].
    fn applications_table(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "{:>7} {:<16} {:<12} {:>4} {:>6} {:>6} {:>6} {:<12} {:<6} {:<14} COUNTERS",
            "PID",
            "NAME",
            "PARTITION",
            "POOL",
            "DEMAND",
            "TARGET",
            "ACTIVE",
            "CPUS",
            "NODES",
            "POLICY"
        );
        for a in &self.applications {
            let set: partita_protocol::CpuSet = a.cpus.iter().copied().collect();
            let set = if a.shared {
                format!("{set} shared")
            } else {
                set.to_string()
            };
            let nodes: Vec<String> = a.nodes.iter().map(u32::to_string).collect();
            let _ = writeln!(
                s,
                "{:>7} {:<16} {:<12} {:>4} {:>6} {:>6} {:>6} {:<12} {:<6} {:<14} {}",
                a.pid,
                a.name,
                a.partition,
                a.pool_size,
                a.demand,
                a.target,
                a.active,
                set,
                nodes.join(","),
                a.policy.to_string(),
                a.counters_cell()
            );
        }
        self.jobserver_table(s);
        self.memory_table(s);
    }

    /// Where each application's pages are and what the page mover does (shown when the
    /// mover runs or some application's pages were read).
    fn memory_table(&self, s: &mut String) {
        let m = &self.memory;
        let any = self
            .applications
            .iter()
            .any(|a| !a.pages_per_node.is_empty());
        if !m.running && !any {
            return;
        }
        let _ = writeln!(
            s,
            "\nmemory ({} nodes; mover {}: {} migrations, {} MiB moved, {} waited for the cost rule, {} errors)",
            m.nodes,
            if m.running { "on" } else { "off" },
            m.migrations,
            m.moved_bytes >> 20,
            m.deferred,
            m.errors
        );
        let _ = writeln!(
            s,
            "{:>7} {:<16} {:<28} {:>5} {:>9} MIGRATION",
            "PID", "NAME", "PAGES PER NODE", "MOVES", "MOVED MiB"
        );
        for a in &self.applications {
            let pages: Vec<String> = a
                .pages_per_node
                .iter()
                .map(|(n, p)| format!("{n}:{p}"))
                .collect();
            let _ = writeln!(
                s,
                "{:>7} {:<16} {:<28} {:>5} {:>9} {}",
                a.pid,
                a.name,
                pages.join(" "),
                a.memory_moves,
                a.memory_moved_bytes >> 20,
                a.memory_migration
            );
        }
    }

    /// Builds under `partita run --jobserver`, with their tokens (shown only when there are
    /// any).
    fn jobserver_table(&self, s: &mut String) {
        let builds: Vec<&AppStatus> = self
            .applications
            .iter()
            .filter(|a| a.jobserver_tokens.is_some())
            .collect();
        if builds.is_empty() {
            return;
        }
        let _ = writeln!(s, "\njobserver builds");
        let _ = writeln!(
            s,
            "{:>7} {:<16} {:>6} {:>6} {:>6}",
            "PID", "NAME", "TOKENS", "CPUS", "DEMAND"
        );
        for a in builds {
            let _ = writeln!(
                s,
                "{:>7} {:<16} {:>6} {:>6} {:>6}",
                a.pid,
                a.name,
                a.jobserver_tokens.unwrap_or(0),
                a.target,
                a.demand
            );
        }
    }
}

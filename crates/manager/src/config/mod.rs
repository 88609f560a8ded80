//! Configuration (TOML). Every paper parameter is here with the paper's value as default;
//! unknown keys and invalid values are errors naming the key.
//!
//! ```toml
//! control = "full"            # or "partition-only": confine to CPU sets, keep targets at pool size
//! max_applications = 4096
//! hello_timeout_ms = 2000     # a client that says nothing is dropped after this
//! realloc_period_ms = 300     # Tucker: reallocation / rotation period
//! sample_period_ms = 50       # runnable-thread sampling of uncontrolled processes
//! handover_us = 2000          # a revoked CPU waits at most this for its worker to park (0: off)
//! min_target = 1              # an application given no CPU of its own keeps one worker (0: stops)
//! uncontrolled = "system"     # or "tracked": only processes started with `partita run`
//! cgroups = true              # confine uncontrolled processes with cpuset cgroups when possible
//! max_connections = 4160      # open connections at once (the fd limit is raised to fit)
//! max_connections_per_uid = 1024
//!
//! [usage_decay]               # Tucker §6.3.2
//! c = 0.95
//! s = 20.0
//! period_ms = 300
//!
//! [dss]                        # NANOS
//! quantum_ms = 100
//!
//! [bandwidth]                 # Antonopoulos et al., for partitions with policy = "bandwidth"
//! variant = "latest-quantum"  # or "quanta-window"
//! quantum_ms = 200
//! window = 5                  # quanta averaged by quanta-window
//! # capacity_gbps = 12.5      # overrides the state file written by `partita calibrate`
//! # sources = ["perf-event", "resctrl", "self-report"]   # counter sources, tried in order
//!
//! [numa_migration]           # memory follows CPUs (crate::memfollow::config)
//! enabled = true
//!
//! [[partition]]
//! name = "batch"
//! share = 1                   # or: cpus = 2 (fixed count)
//! sharing = "lend-idle"       # "never" | "always"
//! policy = "equipartition"    # "usage-decay" | "dss" | "batch" | "bandwidth"
//! members = { names = ["solver"], uids = [1000], hint = true }
//!
//! [[cgroup_rule]]             # partitions from the programs' cgroups (crate::cgroup::rules)
//! preset = "slurm"            # "kubernetes" | "systemd-slice", or match = '<regex>', name = "x-$1"
//! sharing = "never"           # a job's CPUs are its own; "lend-idle" lends what it leaves idle
//! ```
//!
//! The `default` partition always exists (share 1, equipartition); a `[[partition]]` named
//! `default` overrides its share, sharing and policy.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Whether the manager changes worker targets or only confines to CPU sets.
///
/// ```
/// assert_eq!(partita_manager::Control::default(), partita_manager::Control::Full);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Control {
    /// Process control: targets follow the allocation, CPU sets confine.
    #[default]
    Full,
    /// Space partitioning only: applications are confined to their CPU sets but keep all their
    /// workers active (the demo's "partitioned" mode).
    PartitionOnly,
}

/// Where the demand of uncontrolled processes in the default partition comes from.
///
/// ```
/// assert_eq!(partita_manager::config::Uncontrolled::default(), partita_manager::config::Uncontrolled::System);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Uncontrolled {
    /// Every runnable thread on the managed CPUs that is not a registered application's.
    #[default]
    System,
    /// Only processes started with `partita run` (and their descendants).
    Tracked,
}

/// Level-1 sharing policy of a partition (Verghese).
///
/// ```
/// assert_eq!(partita_manager::config::Sharing::default(), partita_manager::config::Sharing::LendIdle);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Sharing {
    /// Idle entitlement is lent to partitions with unmet demand and revoked when needed.
    #[default]
    LendIdle,
    /// Fixed quota: never lends, never borrows.
    Never,
    /// No protection: the partition's CPUs are shared with everyone all the time.
    Always,
}

/// Level-2 policy inside a partition.
///
/// ```
/// assert_eq!(partita_manager::config::PolicyKind::default().to_string(), "equipartition");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// Max-min fair, rotating uneven remainders.
    #[default]
    Equipartition,
    /// Tucker's usage-decay allocator.
    UsageDecay,
    /// NANOS Dynamic Space Sharing.
    Dss,
    /// First come, first served, exact requests.
    Batch,
    /// Antonopoulos et al.'s bandwidth-aware co-scheduling, one quantum at a time (see
    /// [`BandwidthConfig`]).
    Bandwidth,
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PolicyKind::Equipartition => "equipartition",
            PolicyKind::UsageDecay => "usage-decay",
            PolicyKind::Dss => "dss",
            PolicyKind::Batch => "batch",
            PolicyKind::Bandwidth => "bandwidth",
        })
    }
}

/// Who belongs to a partition.
///
/// ```
/// let m = partita_manager::config::Membership::default();
/// assert!(m.names.is_empty() && m.hint);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Membership {
    /// Application names (hello `name`, or the executable name of uncontrolled processes).
    pub names: Vec<String>,
    /// User ids.
    pub uids: Vec<u32>,
    /// Group ids.
    pub gids: Vec<u32>,
    /// Whether an application's `partition_hint` may select this partition.
    pub hint: bool,
}

impl Default for Membership {
    fn default() -> Self {
        Membership {
            names: Vec::new(),
            uids: Vec::new(),
            gids: Vec::new(),
            hint: true,
        }
    }
}

/// One partition (Verghese's software performance unit).
///
/// ```
/// let p = partita_manager::config::PartitionConfig::named("batch");
/// assert_eq!(p.share, 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionConfig {
    /// Unique name.
    pub name: String,
    /// Weight for proportional entitlement (ignored when `cpus` is set).
    #[serde(default = "one")]
    pub share: u32,
    /// Fixed CPU count instead of a share.
    #[serde(default)]
    pub cpus: Option<u32>,
    /// Sharing policy.
    #[serde(default)]
    pub sharing: Sharing,
    /// Level-2 policy.
    #[serde(default)]
    pub policy: PolicyKind,
    /// Membership rule.
    #[serde(default)]
    pub members: Membership,
}

fn one() -> u32 {
    1
}

impl PartitionConfig {
    /// A partition with share 1, lend-idle, equipartition, hint allowed.
    ///
    /// ```
    /// assert_eq!(partita_manager::config::PartitionConfig::named("x").name, "x");
    /// ```
    pub fn named(name: &str) -> Self {
        PartitionConfig {
            name: name.to_string(),
            share: 1,
            cpus: None,
            sharing: Sharing::LendIdle,
            policy: PolicyKind::Equipartition,
            members: Membership::default(),
        }
    }
}

/// Tucker's usage-decay parameters.
///
/// ```
/// let u = partita_manager::config::UsageDecayConfig::default();
/// assert_eq!((u.c, u.s, u.period_ms), (0.95, 20.0, 300));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UsageDecayConfig {
    /// Decay factor per period.
    pub c: f64,
    /// Penalty per CPU already handed out this round.
    pub s: f64,
    /// Decay period.
    pub period_ms: u64,
    /// Seed of the tie-breaking RNG.
    pub seed: u64,
}

impl Default for UsageDecayConfig {
    fn default() -> Self {
        UsageDecayConfig {
            c: 0.95,
            s: 20.0,
            period_ms: 300,
            seed: 0x5eed,
        }
    }
}

/// NANOS DSS parameters.
///
/// ```
/// assert_eq!(partita_manager::config::DssConfig::default().quantum_ms, 100);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DssConfig {
    /// Quantum for serving groups in turn when applications outnumber CPUs.
    pub quantum_ms: u64,
}

impl Default for DssConfig {
    fn default() -> Self {
        DssConfig { quantum_ms: 100 }
    }
}

/// Which rate estimate the bandwidth policy uses.
///
/// ```
/// assert_eq!(partita_manager::config::BandwidthVariant::default(), partita_manager::config::BandwidthVariant::LatestQuantum);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum BandwidthVariant {
    /// The rate measured in the application's last quantum.
    #[default]
    LatestQuantum,
    /// The mean of its last `window` quanta (smooths bursty applications).
    QuantaWindow,
}

/// Parameters of the bandwidth policy (Antonopoulos et al.; the paper's values as defaults).
///
/// ```
/// let b = partita_manager::config::BandwidthConfig::default();
/// assert_eq!((b.quantum_ms, b.window), (200, 5));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BandwidthConfig {
    /// Latest Quantum or Quanta Window.
    pub variant: BandwidthVariant,
    /// Length of a quantum.
    pub quantum_ms: u64,
    /// Samples averaged by Quanta Window.
    pub window: usize,
    /// Sustained memory bandwidth in GB/s; `None`: the state file of `partita calibrate`.
    pub capacity_gbps: Option<f64>,
    /// Where `partita calibrate` stored the capacity; `None`: the default state file.
    pub state_file: Option<std::path::PathBuf>,
    /// Counter sources tried in order (`perf-event`, `resctrl`, `self-report`); when every one
    /// is skipped the source is `none` and the policy degrades to equipartition.
    pub sources: Vec<String>,
}

/// Names of the counter sources a configuration may list, in the default order (opened by
/// [`crate::counters::Chain::detect`]).
pub const COUNTER_SOURCES: [&str; 3] = ["perf-event", "resctrl", "self-report"];

impl Default for BandwidthConfig {
    fn default() -> Self {
        BandwidthConfig {
            variant: BandwidthVariant::LatestQuantum,
            quantum_ms: 200,
            window: 5,
            capacity_gbps: None,
            state_file: None,
            sources: COUNTER_SOURCES.map(String::from).to_vec(),
        }
    }
}

/// The default revocation hand-over deadline (µs), chosen by measurement
/// (docs/bench/manager.md, "Revocation hand-over").
pub const DEFAULT_HANDOVER_US: u64 = 2000;
/// The longest hand-over deadline accepted (µs).
pub const MAX_HANDOVER_US: u64 = 100_000;

/// The manager's configuration.
///
/// ```
/// use partita_manager::Config;
/// let c = Config::from_toml_str("control = \"partition-only\"\n[[partition]]\nname = \"a\"\nshare = 2\n").unwrap();
/// assert_eq!(c.control, partita_manager::Control::PartitionOnly);
/// let e = Config::from_toml_str("realloc_period_ms = 0").unwrap_err();
/// assert!(e.to_string().contains("realloc_period_ms"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Full process control or partition-only.
    pub control: Control,
    /// Most applications registered at once.
    pub max_applications: usize,
    /// A connection that sends nothing within this time is dropped.
    pub hello_timeout_ms: u64,
    /// Reallocation / rotation period (Tucker: 300 ms).
    pub realloc_period_ms: u64,
    /// Sampling period of runnable threads of uncontrolled processes.
    pub sample_period_ms: u64,
    /// The revocation hand-over's deadline (µs): a CPU revoked from a controlled application
    /// goes to its new owner once the application's active workers are down to its target,
    /// or this long after the revocation was published. 0: at once (no hand-over).
    pub handover_us: u64,
    /// The least target of an application that wants CPUs, in an equipartition or
    /// usage-decay partition that has some: 1 (default) keeps one worker running on the
    /// partition's CPUs, time-shared with their owners, while the rotation gives it none of
    /// its own (Tucker: an application reduces to one process, never below); 0 stops it
    /// until its turn (`crate::realloc::plan`).
    pub min_target: u32,
    /// Source of the default partition's demand.
    pub uncontrolled: Uncontrolled,
    /// Use cpuset cgroups for uncontrolled processes when possible.
    pub cgroups: bool,
    /// Restrict the managed CPUs further (CPU list); empty: every CPU the manager may use.
    pub cpus: String,
    /// Usage-decay parameters.
    pub usage_decay: UsageDecayConfig,
    /// DSS parameters.
    pub dss: DssConfig,
    /// Bandwidth-policy parameters.
    pub bandwidth: BandwidthConfig,
    /// Partitions besides `default`.
    #[serde(rename = "partition")]
    pub partitions: Vec<PartitionConfig>,
    /// Rules that make partitions from the registering programs' cgroups (Slurm jobs,
    /// Kubernetes pods, systemd slices; [`crate::cgroup::rules`]).
    #[serde(rename = "cgroup_rule")]
    pub cgroup_rules: Vec<crate::cgroup::rules::CgroupRule>,
    /// Most connections open at once (registered applications, status and confine
    /// requests, clients that have not spoken yet).
    pub max_connections: usize,
    /// Most connections open at once from one uid.
    pub max_connections_per_uid: usize,
    /// Page migration of registered applications (memory follows CPUs).
    pub numa_migration: crate::memfollow::MigrationConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            control: Control::Full,
            max_applications: 4096,
            hello_timeout_ms: 2000,
            realloc_period_ms: 300,
            sample_period_ms: 50,
            handover_us: DEFAULT_HANDOVER_US,
            min_target: 1,
            uncontrolled: Uncontrolled::System,
            cgroups: true,
            cpus: String::new(),
            usage_decay: UsageDecayConfig::default(),
            dss: DssConfig::default(),
            bandwidth: BandwidthConfig::default(),
            partitions: Vec::new(),
            cgroup_rules: Vec::new(),
            max_connections: 4096 + 64,
            max_connections_per_uid: 1024,
            numa_migration: Default::default(),
        }
    }
}

/// A configuration error; the message names the key and the value.
///
/// ```
/// let e = partita_manager::Config::from_toml_str("max_applications = 0").unwrap_err();
/// assert!(matches!(e, partita_manager::ConfigError::Invalid { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// TOML syntax, an unknown key or a value of the wrong type (the parser names the key).
    #[error("invalid configuration: {0}")]
    Parse(String),
    /// A value outside its domain.
    #[error("invalid configuration: key `{key}` = {value}: {reason}")]
    Invalid {
        /// Dotted key.
        key: String,
        /// The value as written.
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The file could not be read.
    #[error("cannot read configuration {path}: {reason}")]
    Io {
        /// File.
        path: String,
        /// OS error text.
        reason: String,
    },
}

/// A [`ConfigError::Invalid`] naming the key, the value and the rule it breaks.
fn bad(key: &str, value: impl fmt::Display, reason: &'static str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    }
}

/// Names reach the wire (`partita status`, replies) and the log: a control character in one
/// (a tab, a newline, an escape sequence) is refused, naming the key and the character. (The
/// wire encoder would make it harmless, as U+FFFD, but the operator would not see the name
/// they wrote.)
fn no_control(key: &str, value: &str) -> Result<(), ConfigError> {
    match value.char_indices().find(|(_, c)| c.is_control()) {
        Some((at, c)) => Err(bad(
            key,
            format!("{value:?} (U+{:04X} at byte {at})", c as u32),
            "control characters are not allowed",
        )),
        None => Ok(()),
    }
}

impl Config {
    /// Parse and validate TOML.
    ///
    /// ```
    /// let e = partita_manager::Config::from_toml_str("bogus = 1").unwrap_err();
    /// assert!(e.to_string().contains("bogus"));
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// Read, parse and validate a file.
    ///
    /// ```
    /// assert!(partita_manager::Config::from_file(std::path::Path::new("/nonexistent.toml")).is_err());
    /// ```
    pub fn from_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Config::from_toml_str(&text)
    }

    /// Check every value's domain.
    ///
    /// ```
    /// assert!(partita_manager::Config::default().validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_applications == 0 {
            return Err(bad("max_applications", 0, "must be at least 1"));
        }
        if self.max_connections == 0 {
            return Err(bad("max_connections", 0, "must be at least 1"));
        }
        if self.max_connections_per_uid == 0 {
            return Err(bad("max_connections_per_uid", 0, "must be at least 1"));
        }
        if self.hello_timeout_ms == 0 {
            return Err(bad("hello_timeout_ms", 0, "must be positive"));
        }
        if self.realloc_period_ms == 0 {
            return Err(bad("realloc_period_ms", 0, "must be positive"));
        }
        if self.sample_period_ms == 0 {
            return Err(bad("sample_period_ms", 0, "must be positive"));
        }
        if self.handover_us > MAX_HANDOVER_US {
            return Err(bad(
                "handover_us",
                self.handover_us,
                "must be at most 100000 (100 ms): a longer hand-over would starve the new owner",
            ));
        }
        if self.min_target > 1 {
            return Err(bad(
                "min_target",
                self.min_target,
                "must be 0 or 1 (more would oversubscribe the partition's CPUs)",
            ));
        }
        let u = &self.usage_decay;
        if !(u.c > 0.0 && u.c <= 1.0) {
            return Err(bad("usage_decay.c", u.c, "must be in (0, 1]"));
        }
        if !(u.s.is_finite() && u.s >= 0.0) {
            return Err(bad("usage_decay.s", u.s, "must be a finite number >= 0"));
        }
        if u.period_ms == 0 {
            return Err(bad("usage_decay.period_ms", 0, "must be positive"));
        }
        if self.dss.quantum_ms == 0 {
            return Err(bad("dss.quantum_ms", 0, "must be positive"));
        }
        let b = &self.bandwidth;
        if b.quantum_ms == 0 {
            return Err(bad("bandwidth.quantum_ms", 0, "must be positive"));
        }
        if b.window == 0 {
            return Err(bad("bandwidth.window", 0, "must be at least 1"));
        }
        if let Some(c) = b.capacity_gbps {
            if !(c.is_finite() && c > 0.0) {
                return Err(bad(
                    "bandwidth.capacity_gbps",
                    c,
                    "must be a positive number",
                ));
            }
        }
        for (i, name) in b.sources.iter().enumerate() {
            if !COUNTER_SOURCES.contains(&name.as_str()) {
                return Err(bad(
                    &format!("bandwidth.sources[{i}]"),
                    format!("{name:?}"),
                    "not a counter source (perf-event, resctrl, self-report)",
                ));
            }
        }
        if !self.cpus.is_empty() && self.cpus.parse::<partita_protocol::CpuSet>().is_err() {
            return Err(bad("cpus", format!("{:?}", self.cpus), "not a CPU list"));
        }
        self.numa_migration.validate()?;
        crate::cgroup::rules::compile(&self.cgroup_rules)
            .map_err(|(key, value, reason)| bad(&key, value, reason))?;
        self.validate_partitions()
    }

    /// Check the `[[partition]]` tables: names 1 to 64 bytes, unique and without control
    /// characters (membership names too), a share or CPU count.
    fn validate_partitions(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.partitions.iter().enumerate() {
            let key = |k: &str| format!("partition[{i}].{k}");
            if p.name.is_empty() || p.name.len() > partita_protocol::wire::MAX_NAME {
                return Err(bad(
                    &key("name"),
                    format!("{:?}", p.name),
                    "must be 1 to 64 bytes",
                ));
            }
            no_control(&key("name"), &p.name)?;
            for (j, n) in p.members.names.iter().enumerate() {
                no_control(&key(&format!("members.names[{j}]")), n)?;
            }
            if !seen.insert(p.name.clone()) {
                return Err(bad(
                    &key("name"),
                    format!("{:?}", p.name),
                    "duplicate partition name",
                ));
            }
            if p.share == 0 && p.cpus.is_none() {
                return Err(bad(&key("share"), 0, "must be at least 1"));
            }
            if p.cpus == Some(0) {
                return Err(bad(&key("cpus"), 0, "must be at least 1"));
            }
        }
        Ok(())
    }

    /// The partitions in allocation order: `default` first, then the configured ones.
    ///
    /// ```
    /// let ps = partita_manager::Config::default().partition_list();
    /// assert_eq!(ps.len(), 1);
    /// assert_eq!(ps[0].name, "default");
    /// ```
    pub fn partition_list(&self) -> Vec<PartitionConfig> {
        let mut out = vec![self
            .partitions
            .iter()
            .find(|p| p.name == DEFAULT_PARTITION)
            .cloned()
            .unwrap_or_else(|| PartitionConfig::named(DEFAULT_PARTITION))];
        out.extend(
            self.partitions
                .iter()
                .filter(|p| p.name != DEFAULT_PARTITION)
                .cloned(),
        );
        out
    }
}

/// Name of the built-in partition for uncontrolled processes and unmatched applications.
pub const DEFAULT_PARTITION: &str = "default";

/// Fixed `cpus` counts must fit the CPUs the manager manages (`managed`): an error naming the
/// first partition's key whose count, added to the ones before it, exceeds them.
///
/// ```
/// let c = partita_manager::Config::from_toml_str("[[partition]]\nname = \"a\"\ncpus = 3\n").unwrap();
/// assert!(partita_manager::config::check_fixed_cpus(&c, 4).is_ok());
/// let e = partita_manager::config::check_fixed_cpus(&c, 2).unwrap_err();
/// assert!(e.to_string().contains("partition[0].cpus"));
/// ```
pub fn check_fixed_cpus(config: &Config, managed: usize) -> Result<(), ConfigError> {
    let mut sum = 0usize;
    for (i, p) in config.partitions.iter().enumerate() {
        if let Some(n) = p.cpus {
            sum += n as usize;
            if sum > managed {
                return Err(ConfigError::Invalid {
                    key: format!("partition[{i}].cpus"),
                    value: format!("{n} (fixed counts add up to {sum}, {managed} CPUs managed)"),
                    reason: "fixed CPU counts exceed the CPUs the manager manages",
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! Partitions made from the registering programs' cgroups (issue 30): a program whose cgroup
//! a `[[cgroup_rule]]` matches goes to the partition of its job, pod or slice, which appears
//! with its first program and goes with its last. Its CPUs are the cgroup's effective cpuset
//! and its count at most the quota ([`crate::alloc::bound`]); a program whose cgroup cannot
//! be read, or whose cpuset is empty, goes where the configured partitions put it, with a log
//! line saying why. [`Registry::recheck_cgroups`] follows programs that move and cpusets that
//! change.

use super::Registry;
use crate::alloc::bound::Bound;
use crate::cgroup::limits::{self, Found, Mounts};
use crate::cgroup::rules::{self, Compiled};
use crate::config::{Config, Membership, PartitionConfig};
use crate::status::PartitionStatus;
use partita_protocol::wire::ErrorCode;
use std::sync::atomic::Ordering;

/// A partition made from a cgroup.
#[derive(Debug, Clone)]
struct Slot {
    bound: Bound,
    /// The cgroup (hierarchy-relative).
    prefix: String,
}

/// The rules and the partitions they made.
#[derive(Debug)]
pub(crate) struct CgroupPartitions {
    rules: Vec<Compiled>,
    mounts: Mounts,
    /// Indexed like the registry's partitions: `Some` for those made from a cgroup.
    slots: Vec<Option<Slot>>,
}

impl CgroupPartitions {
    /// The configuration's rules (validated when it was loaded), for `n` configured
    /// partitions.
    pub(crate) fn new(config: &Config, n: usize) -> CgroupPartitions {
        let rules = rules::compile(&config.cgroup_rules).unwrap_or_default();
        let mounts = if rules.is_empty() {
            Mounts::default()
        } else {
            limits::mounts()
        };
        CgroupPartitions {
            rules,
            mounts,
            slots: vec![None; n],
        }
    }

    /// The allocator's bounds, indexed like the partitions.
    pub(crate) fn bounds(&self) -> Vec<Option<Bound>> {
        if self.rules.is_empty() {
            return Vec::new();
        }
        self.slots
            .iter()
            .map(|s| s.as_ref().map(|s| s.bound))
            .collect()
    }

    /// Add each cgroup partition's cgroup and cpuset to its status.
    pub(crate) fn annotate(&self, partitions: &mut [PartitionStatus]) {
        for (p, s) in partitions.iter_mut().zip(&self.slots) {
            if let Some(s) = s {
                p.cgroup = s.prefix.clone();
                p.cgroup_cpus = s.bound.cpus.to_vec();
            }
        }
    }

    /// Whether a rule's partitions use policy `k` (their periods count from the start).
    pub(crate) fn uses(&self, k: crate::config::PolicyKind) -> bool {
        self.rules.iter().any(|r| r.policy == k)
    }

    /// Where `pid`'s cgroup puts it (`Ok(None)`: no rule matches, or no rules).
    fn locate(&self, pid: i32) -> Result<Option<Found>, String> {
        if self.rules.is_empty() {
            return Ok(None);
        }
        limits::locate(pid, &self.rules, &self.mounts)
    }
}

impl Registry {
    /// Where a registering program goes: its cgroup's partition when a rule matches its
    /// cgroup, else by hint and membership ([`Registry::choose_partition`]).
    pub(super) fn place(
        &mut self,
        pid: i32,
        name: &str,
        uid: u32,
        gid: u32,
        hint: &str,
    ) -> Result<usize, (ErrorCode, String)> {
        match self.cgroups.locate(pid) {
            Ok(Some(found)) => {
                if let Some(k) = self.cgroup_partition(&found, pid) {
                    return Ok(k);
                }
            }
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(pid, reason = %why, "cannot place the program by its cgroup; placed by the configured partitions");
            }
        }
        self.choose_partition(name, uid, gid, hint)
    }

    /// The partition for `found`, made now if it is the first program of its cgroup (with the
    /// cgroup's limits, which also refresh an existing one's). `None` when its name is a
    /// configured partition's (logged).
    fn cgroup_partition(&mut self, found: &Found, pid: i32) -> Option<usize> {
        let k = self.partitions.iter().position(|p| p.name == found.name);
        let slot = Slot {
            bound: Bound {
                cpus: found.limits.cpus,
                cap: found.limits.quota_cpus,
            },
            prefix: found.prefix.clone(),
        };
        match k {
            Some(k) if self.cgroups.slots.get(k).is_some_and(Option::is_some) => {
                self.refresh_slot(k, slot, found.limits.weight);
                Some(k)
            }
            Some(_) => {
                tracing::warn!(pid, partition = %found.name, cgroup = %found.prefix, "a cgroup rule names a configured partition; placed by the configured partitions");
                None
            }
            None => {
                let rule = &self.cgroups.rules[found.rule];
                let mut p = PartitionConfig::named(&found.name);
                p.share = found.limits.weight.max(1);
                p.cpus = found.limits.quota_cpus;
                p.sharing = rule.sharing;
                p.policy = rule.policy;
                // Only its cgroup's programs: no hint, no `partita run --partition`.
                p.members = Membership {
                    hint: false,
                    ..Membership::default()
                };
                tracing::info!(partition = %found.name, cgroup = %found.prefix, cpus = %slot.bound.cpus, quota = ?slot.bound.cap, "partition made from a cgroup");
                self.partitions.push(p);
                self.runnable.push(Default::default());
                self.uncontrolled_sets.push(Default::default());
                self.cgroups.slots.resize(self.partitions.len() - 1, None);
                self.cgroups.slots.push(Some(slot));
                Some(self.partitions.len() - 1)
            }
        }
    }

    /// New limits for cgroup partition `k` (logged when they changed).
    fn refresh_slot(&mut self, k: usize, slot: Slot, weight: u32) {
        let Some(old) = self.cgroups.slots.get_mut(k) else {
            return;
        };
        let changed = old.as_ref().is_none_or(|o| o.bound != slot.bound);
        if changed {
            tracing::info!(partition = %self.partitions[k].name, cpus = %slot.bound.cpus, quota = ?slot.bound.cap, "the cgroup's limits changed");
        }
        self.partitions[k].share = weight.max(1);
        self.partitions[k].cpus = slot.bound.cap;
        *old = Some(slot);
    }

    /// Remove the cgroup partitions no program is in any more.
    pub(super) fn drop_empty_cgroup_partitions(&mut self) {
        let mut k = self.partitions.len();
        while k > 0 {
            k -= 1;
            let made = self.cgroups.slots.get(k).is_some_and(Option::is_some);
            if made && !self.apps.values().any(|a| a.partition == k) {
                self.remove_partition(k);
            }
        }
    }

    /// Remove partition `k` (a cgroup partition without members); later indices shift down.
    fn remove_partition(&mut self, k: usize) {
        tracing::info!(partition = %self.partitions[k].name, "cgroup partition gone with its last program");
        self.partitions.remove(k);
        self.runnable.remove(k);
        self.uncontrolled_sets.remove(k);
        self.cgroups.slots.remove(k);
        if k < self.last.partitions.len() {
            self.last.partitions.remove(k);
        }
        for a in self.apps.values_mut().filter(|a| a.partition > k) {
            a.partition -= 1;
        }
        for t in self.tracked.iter_mut().filter(|t| t.partition > k) {
            t.partition -= 1;
        }
    }

    /// Read every registered program's cgroup again: a program that moved to another job's
    /// cgroup (or out of one) is re-placed, a cgroup whose cpuset or quota changed gets its
    /// new limits, a cgroup that cannot be read any more sends its program to the
    /// configured partitions; each with a log line. Returns whether anything changed (the
    /// caller rings for a reallocation). Nothing to do without rules.
    pub(crate) fn recheck_cgroups(&mut self) -> bool {
        if self.cgroups.rules.is_empty() {
            return false;
        }
        let apps: Vec<(u32, i32, usize)> = self
            .apps
            .values()
            .map(|a| (a.id, a.pid, a.partition))
            .collect();
        let before = self.cgroups.bounds();
        let mut changed = false;
        for (id, pid, k) in apps {
            let want = match self.cgroups.locate(pid) {
                Ok(Some(found)) => self.cgroup_partition(&found, pid),
                Ok(None) => None,
                Err(why) => {
                    if self.cgroups.slots.get(k).is_some_and(Option::is_some) {
                        tracing::warn!(pid, reason = %why, "cannot read the program's cgroup any more; placed by the configured partitions");
                    }
                    None
                }
            };
            let in_cgroup_partition = self.cgroups.slots.get(k).is_some_and(Option::is_some);
            let to = match want {
                Some(j) => j,
                None if in_cgroup_partition => self.fallback(id),
                None => continue,
            };
            if to != k {
                self.move_app(id, pid, to);
                changed = true;
            }
        }
        changed |= self.cgroups.bounds() != before;
        self.drop_empty_cgroup_partitions();
        changed
    }

    /// Where application `id` goes by the configured partitions (its hint is not known any
    /// more: by name, uid and gid, else `default`).
    fn fallback(&self, id: u32) -> usize {
        let Some(a) = self.apps.get(&id) else {
            return 0;
        };
        let gid = proc_gid(a.pid).unwrap_or(u32::MAX);
        self.choose_partition(&a.name, a.uid, gid, "").unwrap_or(0)
    }

    /// Move application `id` to partition `to`.
    fn move_app(&mut self, id: u32, pid: i32, to: usize) {
        let policy = self.partitions[to].policy;
        let period = crate::quantum::report_period_us(policy, self.config.bandwidth.quantum_ms);
        if let Some(a) = self.apps.get_mut(&id) {
            tracing::info!(pid, from = %self.partitions[a.partition].name, to = %self.partitions[to].name, "program re-placed: its cgroup changed");
            a.partition = to;
            a.page
                .manager
                .report_period_us
                .store(period, Ordering::Relaxed);
        }
    }
}

/// A process's real gid (from `/proc/<pid>/status`).
fn proc_gid(pid: i32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("Gid:"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests;

//! `[numa_migration]`: the manager's page migration (memory follows CPUs) in the
//! configuration.
//!
//! ```toml
//! [numa_migration]
//! enabled = true
//! budget_mib_per_s = 1024     # per application
//! move_cost_us = 200.0        # Verghese: ~200 µs to move a page
//! remote_penalty_ns = 1200.0  # Verghese: ~1.2 µs per remote miss
//! exclude = ["db"]            # application names never migrated (as PARTITA_NUMA=off)
//! ```

use super::policy::Params;
use crate::config::ConfigError;
use serde::{Deserialize, Serialize};

/// The `[numa_migration]` table.
///
/// ```
/// let c = partita_manager::Config::from_toml_str("[numa_migration]\nexclude = [\"db\"]\n").unwrap();
/// assert!(c.numa_migration.enabled && c.numa_migration.exclude == ["db"]);
/// let e = partita_manager::Config::from_toml_str("[numa_migration]\nbudget_mib_per_s = 0\n").unwrap_err();
/// assert!(e.to_string().contains("numa_migration.budget_mib_per_s"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MigrationConfig {
    /// Move registered applications' pages after their CPUs (on machines with several
    /// NUMA nodes).
    pub enabled: bool,
    /// Bytes per second (MiB) one application's migration may move.
    pub budget_mib_per_s: u64,
    /// Cost of moving one page (µs), the cost rule's numerator.
    pub move_cost_us: f64,
    /// Extra cost of a remote over a local miss (ns), the cost rule's denominator.
    pub remote_penalty_ns: f64,
    /// Application names (from their hello) whose memory is never migrated.
    pub exclude: Vec<String>,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        let p = Params::default();
        MigrationConfig {
            enabled: true,
            budget_mib_per_s: p.budget_bytes_per_s >> 20,
            move_cost_us: p.move_ns_per_page / 1000.0,
            remote_penalty_ns: p.remote_penalty_ns,
            exclude: Vec::new(),
        }
    }
}

impl MigrationConfig {
    /// Check every value's domain; errors name the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: String, reason| ConfigError::Invalid {
            key: format!("numa_migration.{key}"),
            value,
            reason,
        };
        if self.budget_mib_per_s == 0 || self.budget_mib_per_s > 1 << 20 {
            return Err(bad(
                "budget_mib_per_s",
                self.budget_mib_per_s.to_string(),
                "must be in 1..=1048576 (set enabled = false to turn migration off)",
            ));
        }
        if !(self.move_cost_us.is_finite() && self.move_cost_us > 0.0) {
            return Err(bad(
                "move_cost_us",
                self.move_cost_us.to_string(),
                "must be a positive number",
            ));
        }
        if !(self.remote_penalty_ns.is_finite() && self.remote_penalty_ns > 0.0) {
            return Err(bad(
                "remote_penalty_ns",
                self.remote_penalty_ns.to_string(),
                "must be a positive number",
            ));
        }
        if let Some((i, n)) = self.exclude.iter().enumerate().find(|(_, n)| n.is_empty()) {
            return Err(bad(
                &format!("exclude[{i}]"),
                format!("{n:?}"),
                "empty name",
            ));
        }
        Ok(())
    }

    /// The policy's parameters.
    ///
    /// ```
    /// let p = partita_manager::memfollow::MigrationConfig::default().params();
    /// assert_eq!(p, partita_manager::memfollow::policy::Params::default());
    /// ```
    pub fn params(&self) -> Params {
        Params {
            move_ns_per_page: self.move_cost_us * 1000.0,
            remote_penalty_ns: self.remote_penalty_ns,
            budget_bytes_per_s: self.budget_mib_per_s << 20,
            ..Params::default()
        }
    }
}

//! Rules that map a program's cgroup path to a partition (issue 30): a cluster scheduler's
//! job, pod or slice becomes one partition, named by the rule, that appears with its first
//! program and goes with its last.
//!
//! ```toml
//! [[cgroup_rule]]
//! preset = "slurm"              # or "kubernetes", "systemd-slice"
//!
//! [[cgroup_rule]]
//! match = '^/batch/(team-[a-z]+)(?:/|$)'   # a regular expression over the cgroup path
//! name = "team-$1"              # the partition's name ($1: the first group)
//! sharing = "never"             # the default: a job's idle CPUs are lent to nobody
//! policy = "equipartition"
//! ```
//!
//! Matching is a pure function of the rules and the path ([`match_path`]); the matched part of
//! the path (up to the end of the match) is the partition's cgroup, whose limits
//! ([`super::limits`]) give the partition its CPUs.

use crate::config::{PolicyKind, Sharing};
use regex::Regex;
use serde::{Deserialize, Serialize};

/// The ready-made rules: (preset name, pattern, partition name template).
pub const PRESETS: [(&str, &str, &str); 3] = [
    // Slurm's task/cgroup: v1 `/slurm/uid_<u>/job_<id>/step_<s>/task_<t>`, v2
    // `/system.slice/slurmstepd.scope/job_<id>/step_<s>/user/task_<t>`.
    (
        "slurm",
        r"^(?:/[^/]+)*?/job_([0-9]+)(?:/|$)",
        "slurm-job-$1",
    ),
    // The kubelet, cgroupfs driver: `/kubepods/burstable/pod<uid>/<container>` (Guaranteed:
    // `/kubepods/pod<uid>`); systemd driver: `/kubepods.slice/kubepods-burstable.slice/
    // kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope`.
    (
        "kubernetes",
        r"^(?:/[^/]+)*?/kubepods[^/]*(?:/[^/]+)*?/(?:kubepods-(?:[a-z]+-)?)?pod([0-9a-fA-F_-]+)(?:\.slice)?(?:/|$)",
        "k8s-pod-$1",
    ),
    // systemd: the innermost slice (`/user.slice/user-1000.slice/session-2.scope` →
    // `slice-user-1000`).
    (
        "systemd-slice",
        r"^(?:/[^/]+\.slice)*/([^/]+)\.slice(?:/|$)",
        "slice-$1",
    ),
];

/// One `[[cgroup_rule]]` as written.
///
/// ```
/// let c = partita_manager::Config::from_toml_str("[[cgroup_rule]]\npreset = \"slurm\"\n").unwrap();
/// assert_eq!(c.cgroup_rules[0].sharing, partita_manager::config::Sharing::Never);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupRule {
    /// A ready-made rule (`slurm`, `kubernetes`, `systemd-slice`); excludes `match`.
    #[serde(default)]
    pub preset: Option<String>,
    /// A regular expression over the cgroup path (`/`-rooted, as in `/proc/<pid>/cgroup`).
    #[serde(default, rename = "match")]
    pub pattern: Option<String>,
    /// The partition's name; `$1`, `${1}`… are the pattern's groups. Default: the preset's,
    /// or `$1`.
    #[serde(default)]
    pub name: Option<String>,
    /// Whether the partition's idle CPUs may be used by others: `never` (the default: a job's
    /// CPUs are its own), `lend-idle` (what its programs do not use goes to other
    /// partitions, and comes back when they want it), `always` (no protection).
    #[serde(default = "never")]
    pub sharing: Sharing,
    /// The level-2 policy among the partition's programs (not `bandwidth`).
    #[serde(default)]
    pub policy: PolicyKind,
}

fn never() -> Sharing {
    Sharing::Never
}

/// A rule ready to match.
#[derive(Debug, Clone)]
pub struct Compiled {
    re: Regex,
    name: String,
    /// The rule's sharing.
    pub sharing: Sharing,
    /// The rule's policy.
    pub policy: PolicyKind,
}

/// A rule's verdict on one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// Index of the rule that matched.
    pub rule: usize,
    /// The partition name the rule makes.
    pub name: String,
    /// The partition's cgroup: the path up to the end of the match.
    pub prefix: String,
}

/// Compile rules; an error names the key (`cgroup_rule[i].match`, `.preset`, `.name`,
/// `.policy`) and says why.
///
/// ```
/// use partita_manager::cgroup::rules::{compile, CgroupRule};
/// let r: CgroupRule = toml::from_str("match = '(['").unwrap();
/// let e = compile(&[r]).unwrap_err();
/// assert_eq!(e.0, "cgroup_rule[0].match");
/// ```
pub fn compile(rules: &[CgroupRule]) -> Result<Vec<Compiled>, (String, String, &'static str)> {
    let mut out = Vec::with_capacity(rules.len());
    for (i, r) in rules.iter().enumerate() {
        let key = |k: &str| format!("cgroup_rule[{i}].{k}");
        let (pattern, default_name) = match (&r.preset, &r.pattern) {
            (Some(p), None) => match PRESETS.iter().find(|x| x.0 == p) {
                Some(&(_, pat, name)) => (pat.to_string(), name),
                None => {
                    return Err((
                        key("preset"),
                        format!("{p:?}"),
                        "not a preset (slurm, kubernetes, systemd-slice)",
                    ))
                }
            },
            (None, Some(m)) => (m.clone(), "$1"),
            (Some(p), Some(_)) => {
                return Err((
                    key("preset"),
                    format!("{p:?}"),
                    "give `preset` or `match`, not both",
                ))
            }
            (None, None) => {
                return Err((
                    key("match"),
                    "nothing".into(),
                    "a rule needs `preset` or `match`",
                ))
            }
        };
        let re = Regex::new(&pattern).map_err(|_| {
            (
                key("match"),
                format!("{pattern:?}"),
                "not a regular expression",
            )
        })?;
        let name = r.name.clone().unwrap_or_else(|| default_name.to_string());
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err((
                key("name"),
                format!("{name:?}"),
                "must be non-empty, without control characters",
            ));
        }
        if r.policy == PolicyKind::Bandwidth {
            return Err((
                key("policy"),
                "\"bandwidth\"".into(),
                "the bandwidth policy is for configured partitions only",
            ));
        }
        out.push(Compiled {
            re,
            name,
            sharing: r.sharing,
            policy: r.policy,
        });
    }
    Ok(out)
}

/// The first rule matching `path`, the partition name it makes and the partition's cgroup.
/// A name that comes out empty, longer than 64 bytes or with a control character is no
/// match for that rule (the next one is tried).
///
/// ```
/// use partita_manager::cgroup::rules::{compile, match_path, CgroupRule};
/// let r: CgroupRule = toml::from_str("preset = 'slurm'").unwrap();
/// let rules = compile(&[r]).unwrap();
/// let m = match_path(&rules, "/slurm/uid_0/job_42/step_0/task_1").unwrap();
/// assert_eq!((m.name.as_str(), m.prefix.as_str()), ("slurm-job-42", "/slurm/uid_0/job_42"));
/// assert!(match_path(&rules, "/user.slice").is_none());
/// ```
pub fn match_path(rules: &[Compiled], path: &str) -> Option<Match> {
    for (i, r) in rules.iter().enumerate() {
        let Some(caps) = r.re.captures(path) else {
            continue;
        };
        let mut name = String::new();
        caps.expand(&r.name, &mut name);
        let ok = !name.is_empty()
            && name.len() <= partita_protocol::wire::MAX_NAME
            && !name.chars().any(char::is_control);
        if !ok {
            continue;
        }
        let end = caps.get(0).map_or(0, |m| m.end());
        let prefix = path[..end].trim_end_matches('/');
        let prefix = if prefix.is_empty() { "/" } else { prefix };
        return Some(Match {
            rule: i,
            name,
            prefix: prefix.to_string(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(p: &str) -> Vec<Compiled> {
        let r: CgroupRule = toml::from_str(&format!("preset = '{p}'")).unwrap();
        compile(&[r]).unwrap()
    }

    fn got(rules: &[Compiled], path: &str) -> Option<(String, String)> {
        match_path(rules, path).map(|m| (m.name, m.prefix))
    }

    #[test]
    fn slurm_jobs_on_v1_and_v2() {
        let r = preset("slurm");
        let s = |a: &str, b: &str| Some((a.to_string(), b.to_string()));
        assert_eq!(
            got(&r, "/slurm/uid_1000/job_7/step_batch/task_0"),
            s("slurm-job-7", "/slurm/uid_1000/job_7")
        );
        assert_eq!(
            got(
                &r,
                "/system.slice/slurmstepd.scope/job_12/step_0/user/task_3"
            ),
            s("slurm-job-12", "/system.slice/slurmstepd.scope/job_12")
        );
        assert_eq!(
            got(&r, "/slurm/uid_0/job_9"),
            s("slurm-job-9", "/slurm/uid_0/job_9")
        );
        for no in [
            "/",
            "/slurm/uid_0",
            "/slurm/job_x/step_0",
            "/a/myjob_3/b",
            "/job_",
        ] {
            assert_eq!(got(&r, no), None, "{no}");
        }
    }

    #[test]
    fn kubernetes_pods_with_both_drivers() {
        let r = preset("kubernetes");
        let uid = "6f1b1d2e-9c1a-4a7e-bb0c-1234567890ab";
        let u_ = uid.replace('-', "_");
        let cases = [
            (format!("/kubepods/burstable/pod{uid}/abcdef"), format!("/kubepods/burstable/pod{uid}"), uid.to_string()),
            (format!("/kubepods/pod{uid}/abcdef"), format!("/kubepods/pod{uid}"), uid.to_string()),
            (format!("/kubepods/besteffort/pod{uid}"), format!("/kubepods/besteffort/pod{uid}"), uid.to_string()),
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u_}.slice/cri-containerd-0a1b.scope"),
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u_}.slice"),
                u_.clone(),
            ),
            (
                format!("/kubepods.slice/kubepods-pod{u_}.slice/cri-containerd-0a1b.scope"),
                format!("/kubepods.slice/kubepods-pod{u_}.slice"),
                u_.clone(),
            ),
        ];
        for (path, prefix, id) in cases {
            assert_eq!(
                got(&r, &path),
                Some((format!("k8s-pod-{id}"), prefix)),
                "{path}"
            );
        }
        for no in [
            "/kubepods",
            "/kubepods/burstable",
            "/kubepods.slice/kubepods-burstable.slice",
            "/system.slice/pod1.service",
        ] {
            assert_eq!(got(&r, no), None, "{no}");
        }
    }

    #[test]
    fn systemd_slices_innermost() {
        let r = preset("systemd-slice");
        let s = |a: &str, b: &str| Some((a.to_string(), b.to_string()));
        assert_eq!(
            got(&r, "/user.slice/user-1000.slice/session-2.scope"),
            s("slice-user-1000", "/user.slice/user-1000.slice")
        );
        assert_eq!(
            got(&r, "/system.slice/partita.service"),
            s("slice-system", "/system.slice")
        );
        assert_eq!(got(&r, "/batch.slice"), s("slice-batch", "/batch.slice"));
        assert_eq!(got(&r, "/init.scope"), None);
        assert_eq!(got(&r, "/"), None);
    }

    #[test]
    fn first_rule_wins_and_custom_names_expand() {
        let rules: Vec<CgroupRule> = vec![
            toml::from_str("match = '^/batch/(team-[a-z]+)(?:/|$)'\nname = 'x-${1}'").unwrap(),
            toml::from_str("preset = 'systemd-slice'").unwrap(),
        ];
        let c = compile(&rules).unwrap();
        let m = match_path(&c, "/batch/team-ab/run1").unwrap();
        assert_eq!(
            (m.rule, m.name.as_str(), m.prefix.as_str()),
            (0, "x-team-ab", "/batch/team-ab")
        );
        assert_eq!(match_path(&c, "/a.slice/b").unwrap().rule, 1);
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("preset = 'lsf'", "cgroup_rule[0].preset"),
            ("preset = 'slurm'\nmatch = 'x'", "cgroup_rule[0].preset"),
            ("name = 'x'", "cgroup_rule[0].match"),
            ("match = '('", "cgroup_rule[0].match"),
            ("match = 'x'\nname = ''", "cgroup_rule[0].name"),
            (
                "preset = 'slurm'\npolicy = 'bandwidth'",
                "cgroup_rule[0].policy",
            ),
        ];
        for (text, key) in cases {
            let r: CgroupRule = toml::from_str(text).unwrap();
            assert_eq!(compile(&[r]).unwrap_err().0, key, "{text}");
        }
    }

    /// A name that comes out too long or empty makes the rule not match: the next rule, or
    /// none (the default partition), never an invalid partition name.
    #[test]
    fn bad_expanded_names_do_not_match() {
        let r: CgroupRule = toml::from_str("match = '^/(x*)'\nname = '$1'").unwrap();
        let c = compile(&[r]).unwrap();
        assert!(match_path(&c, "/").is_none());
        assert!(match_path(&c, &format!("/{}", "x".repeat(65))).is_none());
        assert_eq!(match_path(&c, "/xx").unwrap().name, "xx");
    }

    proptest::proptest! {
        /// Any path: a match's prefix is a prefix of the path ending at a component boundary,
        /// and the name is a valid partition name.
        #[test]
        fn matches_are_component_prefixes(parts in proptest::collection::vec("[a-z_0-9.-]{1,12}|job_[0-9]{1,4}|kubepods|pod[0-9a-f-]{4,12}|[a-z]{1,5}\\.slice", 0..7)) {
            let path = format!("/{}", parts.join("/"));
            let mut rules = Vec::new();
            for p in ["slurm", "kubernetes", "systemd-slice"] {
                rules.extend(preset(p));
            }
            if let Some(m) = match_path(&rules, &path) {
                proptest::prop_assert!(path.starts_with(&m.prefix));
                let rest = &path[m.prefix.len()..];
                proptest::prop_assert!(rest.is_empty() || rest.starts_with('/'), "{} / {}", path, m.prefix);
                proptest::prop_assert!(!m.name.is_empty() && m.name.len() <= 64);
                if m.rule == 0 {
                    let last = m.prefix.rsplit('/').next().unwrap();
                    proptest::prop_assert!(last.starts_with("job_"));
                }
            }
        }
    }
}

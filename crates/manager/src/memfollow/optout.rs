//! Whether an application opted out of page migration.
//!
//! `PARTITA_NUMA=off` in its environment, read by the manager from `/proc/<pid>/environ`
//! when it first sees the application. Why the manager reads it rather than the runtime
//! reporting it: no protocol change (runtimes of any version, and any other client of the
//! protocol, are covered), and the variable is the one the user set when starting the
//! program. What it cannot see: a `setenv` by the program after its start (environ is the
//! initial environment). Reading another user's environ needs the ptrace-read right, which
//! migrating that process's pages needs too; when it cannot be read the application is taken
//! as not opted out, and the migration's own error (EPERM) is what the status shows.
//! The configuration's `numa_migration.exclude` lists names opted out the same way.

/// The values of `PARTITA_NUMA` that opt out.
pub const OFF_VALUES: [&str; 4] = ["off", "0", "false", "no"];

/// Whether the NUL-separated environment block `environ` holds `PARTITA_NUMA=off` (or
/// another of [`OFF_VALUES`], any case). The last definition wins, as for `getenv`.
///
/// ```
/// use partita_manager::memfollow::optout::opted_out_in;
/// assert!(opted_out_in(b"HOME=/root\0PARTITA_NUMA=off\0"));
/// assert!(!opted_out_in(b"PARTITA_NUMA=off\0PARTITA_NUMA=on\0"));
/// assert!(!opted_out_in(b"XPARTITA_NUMA=off\0"));
/// ```
pub fn opted_out_in(environ: &[u8]) -> bool {
    environ
        .split(|b| *b == 0)
        .rev()
        .find_map(|kv| kv.strip_prefix(b"PARTITA_NUMA="))
        .is_some_and(|v| {
            OFF_VALUES
                .iter()
                .any(|off| v.eq_ignore_ascii_case(off.as_bytes()))
        })
}

/// Why process `pid` named `name` is not migrated, if it opted out.
///
/// ```
/// use partita_manager::memfollow::optout::opt_out;
/// assert_eq!(opt_out(std::process::id() as i32, "db", &["db".to_string()]), Some("numa_migration.exclude"));
/// assert_eq!(opt_out(i32::MAX, "x", &[]), None); // unreadable: not opted out
/// ```
pub fn opt_out(pid: i32, name: &str, exclude: &[String]) -> Option<&'static str> {
    if exclude.iter().any(|n| n == name) {
        return Some("numa_migration.exclude");
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    opted_out_in(&environ).then_some("PARTITA_NUMA=off")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_started_with_partita_numa_off_is_seen() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env("PARTITA_NUMA", "OFF")
            .spawn()
            .unwrap();
        // The parent of a vfork-style spawn resumes before the child's new environment is
        // laid out: wait for it (a registered application is long past its exec).
        let settled = |pid: u32| {
            for _ in 0..500 {
                if std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| !e.is_empty()) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        settled(child.id());
        let seen = opt_out(child.id() as i32, "sleep", &[]);
        let mut other = std::process::Command::new("sleep")
            .arg("5")
            .env("PARTITA_NUMA", "on")
            .spawn()
            .unwrap();
        settled(other.id());
        let other_seen = opt_out(other.id() as i32, "sleep", &[]);
        let _ = (child.kill(), other.kill(), child.wait(), other.wait());
        assert_eq!(seen, Some("PARTITA_NUMA=off"));
        assert_eq!(other_seen, None);
    }

    proptest::proptest! {
        #[test]
        fn any_block_is_read_without_panic(env in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = opted_out_in(&env);
        }
    }
}

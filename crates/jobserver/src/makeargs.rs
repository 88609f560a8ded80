//! Taking `-jN` out of a `make` command line.
//!
//! GNU make ignores an inherited jobserver when `-j` is given on its command line ("-jN forced
//! in submake: resetting jobserver mode") and runs its own N slots. So for `partita run
//! --jobserver -- make -j16` the server removes `-j16` from make's arguments and serves 16 as
//! its pool size instead (make then learns `-j` from `MAKEFLAGS`). Only commands whose program
//! is `make` or `gmake` are rewritten; forms understood: `-jN`, `-j N`, `-j`, `--jobs=N`,
//! `--jobs N`, `--jobs`, and `j` at the end of a cluster of flags without arguments (`-kj8`).

use std::ffi::{OsStr, OsString};

/// A `-j` found on a make command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jobs {
    /// `-jN`.
    Count(u32),
    /// `-j` without a number (no limit).
    Unlimited,
}

/// Make options that take the next argument.
const TAKES_ARG: &[&str] = &[
    "-C",
    "-f",
    "-I",
    "-o",
    "-W",
    "-E",
    "--file",
    "--makefile",
    "--directory",
    "--include-dir",
    "--old-file",
    "--assume-old",
    "--what-if",
    "--new-file",
    "--assume-new",
    "--eval",
];

/// Whether `program` is GNU make.
///
/// ```
/// use std::ffi::OsStr;
/// assert!(partita_jobserver::makeargs::is_make(OsStr::new("/usr/bin/make")));
/// assert!(!partita_jobserver::makeargs::is_make(OsStr::new("cargo")));
/// ```
pub fn is_make(program: &OsStr) -> bool {
    let name = std::path::Path::new(program).file_name();
    matches!(name.and_then(OsStr::to_str), Some("make" | "gmake"))
}

fn number(s: &str) -> Option<u32> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Remove every `-j` from make's arguments (`args` excludes the program); returns the rest
/// and the last `-j` seen.
///
/// ```
/// use partita_jobserver::makeargs::{adopt_jobs, Jobs};
/// let a: Vec<std::ffi::OsString> = ["-kj8", "-C", "src", "all"].iter().map(Into::into).collect();
/// let (rest, jobs) = adopt_jobs(&a);
/// assert_eq!(rest, ["-k", "-C", "src", "all"]);
/// assert_eq!(jobs, Some(Jobs::Count(8)));
/// ```
pub fn adopt_jobs(args: &[OsString]) -> (Vec<OsString>, Option<Jobs>) {
    let mut rest = Vec::with_capacity(args.len());
    let mut jobs = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let Some(s) = a.to_str() else {
            rest.push(a.clone());
            continue;
        };
        let next_num = args.get(i).and_then(|n| n.to_str()).and_then(number);
        if TAKES_ARG.contains(&s) {
            rest.push(a.clone());
            if let Some(v) = args.get(i) {
                rest.push(v.clone());
                i += 1;
            }
        } else if s == "-j" || s == "--jobs" {
            jobs = Some(next_num.map_or(Jobs::Unlimited, Jobs::Count));
            i += usize::from(next_num.is_some());
        } else if let Some(n) = s.strip_prefix("--jobs=") {
            jobs = Some(number(n).map_or(Jobs::Unlimited, Jobs::Count));
        } else if let Some((flags, n)) = short_cluster_with_j(s) {
            jobs = Some(match number(n) {
                Some(k) => Jobs::Count(k),
                None if n.is_empty() => match next_num {
                    Some(k) => {
                        i += 1;
                        Jobs::Count(k)
                    }
                    None => Jobs::Unlimited,
                },
                None => Jobs::Unlimited,
            });
            if !flags.is_empty() {
                rest.push(format!("-{flags}").into());
            }
        } else {
            rest.push(a.clone());
        }
    }
    (rest, jobs)
}

/// `-kj8` → `("k", "8")`: a short-flag cluster where every flag before `j` takes no argument.
fn short_cluster_with_j(s: &str) -> Option<(&str, &str)> {
    let body = s.strip_prefix('-').filter(|b| !b.starts_with('-'))?;
    let j = body.find('j')?;
    let flags = &body[..j];
    // Flags that take an argument would swallow the rest of the cluster.
    if flags.chars().any(|c| "CfIoWElO".contains(c)) {
        return None;
    }
    Some((flags, &body[j + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<OsString> {
        a.iter().map(Into::into).collect()
    }

    #[test]
    fn forms() {
        let cases: &[(&[&str], &[&str], Option<Jobs>)] = &[
            (&["-j16"], &[], Some(Jobs::Count(16))),
            (&["-j", "4", "all"], &["all"], Some(Jobs::Count(4))),
            (&["-j", "all"], &["all"], Some(Jobs::Unlimited)),
            (&["--jobs=3"], &[], Some(Jobs::Count(3))),
            (&["--jobs", "5"], &[], Some(Jobs::Count(5))),
            (&["-f", "-j4"], &["-f", "-j4"], None), // a makefile named -j4
            (&["-fj"], &["-fj"], None),             // a makefile named j
            (&["-sj2", "x"], &["-s", "x"], Some(Jobs::Count(2))),
            (&["-k", "VAR=-j3"], &["-k", "VAR=-j3"], None),
        ];
        for (args, rest, jobs) in cases {
            let (r, j) = adopt_jobs(&v(args));
            assert_eq!(r, v(rest), "{args:?}");
            assert_eq!(j, *jobs, "{args:?}");
        }
    }
}

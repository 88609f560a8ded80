//! Sets `cfg(partita_linux)` when the Linux-only half of the runtime is compiled: the manager
//! client, re-pinning (`sched_setaffinity`), NUMA placement, perf-event traffic counters and
//! the futex sleep words. That is every Linux build except one that forces the portable path
//! (a plain work-stealing pool whose `ProcessControl::Manual` still works in-process), so that
//! it is tested on Linux too (`scripts/test.d/65-portable.sh`), with either
//! - `PARTITA_PORTABLE=1` in the environment of the build: only partita-runtime (and what
//!   depends on it) is rebuilt, so the workspace's other artifacts are reused; or
//! - `RUSTFLAGS="--cfg partita_portable"`, which rebuilds every crate.
//!
//! Not a Cargo feature: the portable build has fewer public items (no NUMA API, no measured
//! traffic), and a feature that removes items would break another crate of the same graph
//! that uses them.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(partita_linux)");
    println!("cargo::rustc-check-cfg=cfg(partita_portable)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PARTITA_PORTABLE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    // Cargo sets CARGO_CFG_<NAME> for every cfg of the target, RUSTFLAGS' `--cfg` included.
    let forced_portable = std::env::var_os("CARGO_CFG_PARTITA_PORTABLE").is_some()
        || std::env::var("PARTITA_PORTABLE").is_ok_and(|v| !v.is_empty() && v != "0");
    if linux && !forced_portable {
        println!("cargo::rustc-cfg=partita_linux");
    }
}

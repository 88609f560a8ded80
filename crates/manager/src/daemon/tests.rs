//! The daemon's shared state, without sockets.

use super::application::Unregister;
use super::*;
use crate::config::{Control, Uncontrolled};

/// This test process as a one-worker, partition-only application named `name` (a process
/// registers once at a time: unregister before the next).
fn this_process(name: &str) -> Registration {
    let pid = std::process::id() as i32;
    Registration {
        pid,
        proc: ProcRef::open(pid).unwrap(),
        uid: sys::euid(),
        gid: 0,
        name: name.into(),
        hint: String::new(),
        pool_size: 1,
        partition_only: true,
        jobserver: false,
    }
}

#[test]
fn a_panicking_connection_task_still_unregisters() {
    let c = Config {
        cgroups: false,
        uncontrolled: Uncontrolled::Tracked,
        control: Control::PartitionOnly,
        ..Config::default()
    };
    let shared = shared(c, None).unwrap();
    let id = shared.lock().register(this_process("panicky")).unwrap();
    assert_eq!(shared.status().applications.len(), 1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _guard = Unregister {
            shared: &shared,
            id,
        };
        panic!("a bug in a connection task");
    }));
    assert!(r.is_err());
    assert!(
        shared.status().applications.is_empty(),
        "a ghost holds CPUs"
    );
}

#[test]
fn a_page_says_how_stale_its_reports_may_get() {
    let mut c = Config::from_toml_str(
        "[[partition]]\nname = \"mem\"\npolicy = \"bandwidth\"\nmembers = { names = [\"bw\"] }",
    )
    .unwrap();
    c.cgroups = false;
    c.uncontrolled = Uncontrolled::Tracked;
    c.control = Control::PartitionOnly;
    let shared = shared(c, None).unwrap();
    let period_of = |name: &str| {
        let id = shared.lock().register(this_process(name)).unwrap();
        let (_, fd) = shared.lock().welcome(id).unwrap().unwrap();
        // One registration per process: make room for the next.
        shared.lock().unregister(id);
        let page = partita_protocol::page::PageMap::open(fd).unwrap();
        page.manager
            .report_period_us
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    assert_eq!(period_of("plain"), 100_000, "default partition");
    assert_eq!(
        period_of("bw"),
        10_000,
        "bandwidth partition, 200 ms quanta"
    );
}

#[test]
fn the_tick_counts_only_the_periods_of_policies_in_use() {
    let tick = |toml: &str| {
        let mut c = Config::from_toml_str(toml).unwrap();
        c.cgroups = false;
        shared(c, None).unwrap().lock().periods().tick
    };
    let ms = Duration::from_millis;
    // Defaults: rotation 300 ms; DSS's 100 ms quantum and usage decay's period unused.
    assert_eq!(tick(""), ms(300));
    assert_eq!(
        tick("[dss]\nquantum_ms = 100\n[[partition]]\nname = \"default\"\npolicy = \"dss\""),
        ms(100)
    );
    assert_eq!(
        tick("[usage_decay]\nperiod_ms = 50\n[[partition]]\nname = \"default\"\npolicy = \"usage-decay\""),
        ms(50)
    );
}

#[test]
fn a_manager_with_nothing_tracked_has_nothing_to_measure() {
    let c = |uncontrolled| Config {
        cgroups: false,
        uncontrolled,
        ..Config::default()
    };
    let tracked = shared(c(Uncontrolled::Tracked), None).unwrap();
    let req = tracked.lock().sample_request();
    assert!(sample::nothing_to_measure(&tracked, &req));
    // A confined process tree (here: this test's process as a tree application) keeps
    // the sampler measuring, to hold its descendants inside its CPUs.
    let me = ProcRef::open(std::process::id() as i32).unwrap();
    let cpus = tracked.lock().managed();
    let _ = tracked.enforcer().confine_process(&me, &cpus, true);
    assert!(!sample::nothing_to_measure(&tracked, &req));
    tracked.enforcer().restore_all();
    let system = shared(c(Uncontrolled::System), None).unwrap();
    let req = system.lock().sample_request();
    assert!(!sample::nothing_to_measure(&system, &req));
}

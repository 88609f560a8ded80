//! Node-aware pool memory (issue 14): registration, bad input, the one-node no-op. The
//! two-node behaviour (placement, following the CPUs) is checked in the QEMU guest
//! (`vm/numa/follow/main.rs`).
#![cfg(partita_linux)] // the NUMA API: Linux-only (crates/runtime/build.rs)

use partita_runtime::{PoolMemError, ProcessControl, ThreadPoolBuilder};

fn pool() -> partita_runtime::ThreadPool {
    ThreadPoolBuilder::new()
        .num_threads(2)
        .process_control(ProcessControl::Manual)
        .build()
        .unwrap()
}

#[test]
fn node_vec_is_registered_and_unregistered_on_drop() {
    let p = pool();
    let v = p.node_vec(3 * 4096, |i| i as u8).unwrap();
    assert_eq!(v[4097], 1);
    let r = p.numa_report();
    assert_eq!(r.regions, 1);
    assert_eq!(r.pages, 3, "{r:?}");
    let st = v.page_nodes().unwrap();
    assert!(st.iter().all(|s| s.node().is_some()), "{st:?}");
    drop(v);
    assert_eq!(p.numa_report().regions, 0);
}

#[test]
fn empty_vector_has_no_pages() {
    let p = pool();
    let v = p.node_vec(0, |_| 0u64).unwrap();
    assert!(v.is_empty());
    assert_eq!(p.numa_report().pages, 0);
    assert!(v.page_nodes().unwrap().is_empty());
}

#[test]
fn one_node_machine_says_why() {
    let r = pool().numa_report();
    if partita_numa::online_nodes().len() < 2 {
        let why = r
            .inactive_reason
            .expect("a one-node machine must say why nothing happens");
        assert!(why.contains("one NUMA node"), "{why}");
    } else {
        assert_eq!(r.inactive_reason, None);
    }
    assert!(r.follow);
}

#[test]
fn opt_out_is_reported() {
    let p = ThreadPoolBuilder::new().numa_follow(false).build().unwrap();
    assert!(!p.numa_report().follow);
}

#[test]
fn migrate_to_missing_node_is_a_typed_error() {
    let p = pool();
    let v = p.node_vec(4096, |i| i as u8).unwrap();
    let e = p.migrate_memory(&v, 4000).unwrap_err();
    assert!(
        matches!(&e, PoolMemError::Numa(n) if n.call() == "migrate_memory"),
        "{e}"
    );
    assert!(e.to_string().contains("4000"), "{e}");
    assert_eq!(v[100], 100, "data intact");
}

#[test]
fn region_of_another_pool_is_not_registered_here() {
    let (a, b) = (pool(), pool());
    let v = a.node_vec(4096, |i| i as u8).unwrap();
    let e = b.migrate_memory(&v, 0).unwrap_err();
    assert!(
        matches!(
            e,
            PoolMemError::NotRegistered {
                call: "migrate_memory",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn migrate_to_own_node_counts_every_page() {
    let p = pool();
    let node = partita_numa::online_nodes().iter().next().unwrap(); // at least one node
    let v = p.node_vec(8 * 4096, |i| i as u8).unwrap();
    let out = p.migrate_memory(&v, node).unwrap();
    assert_eq!(out.present, 8);
    assert_eq!(out.on_node, 8);
    assert_eq!(out.failed, 0);
    assert!(out
        .to_string()
        .starts_with(&format!("numa-follow: 8 of 8 pages on node {node} after")));
}

#[test]
fn sampler_is_opt_in_and_a_one_node_no_op_says_why() {
    let p = pool();
    let v = p.node_vec(4 * 4096, |i| i as u8).unwrap();
    v.hint(0..v.len(), false); // before the sampler: ignored
    #[allow(clippy::reversed_empty_ranges)] // bad input on purpose
    v.hint(10..5, true); // empty range: ignored
    v.hint(0..usize::MAX, false); // clipped, no panic
    assert_eq!(p.numa_report().sampler, None);
    p.start_numa_sampler(partita_runtime::SamplerParams::default())
        .unwrap();
    if partita_numa::online_nodes().len() < 2 {
        std::thread::sleep(std::time::Duration::from_millis(250));
        let r = p.numa_report();
        assert_eq!(r.sampler, None, "no sampler on one node");
        assert!(r.inactive_reason.is_some());
    }
}

#[test]
fn replicated_has_a_copy_on_each_node_of_the_pool() {
    let p = pool();
    let mut r = p.replicated(vec![1u32, 2, 3]).unwrap();
    let nodes = r.copy_nodes();
    assert!(!nodes.is_empty());
    assert!(nodes.len() <= partita_numa::online_nodes().len());
    r.update(|v| v.push(4));
    assert_eq!(p.install(|| r.get().clone()), vec![1, 2, 3, 4]);
}

#[test]
fn worker_homes_are_tracked_only_where_they_can_follow() {
    // A pool no manager places never moves CPU sets: its workers register no home. (The
    // placed-and-moved case runs in the two-node guest.)
    let p = pool();
    p.install(|| ());
    assert_eq!(p.worker_homes().unwrap(), Vec::new());
    assert_eq!(p.install(|| 1 + 1), 2);
}

#[test]
fn stopping_a_sampler_that_never_ran_says_so() {
    let p = pool();
    assert!(!p.stop_numa_sampler());
    let fault = partita_runtime::SamplerParams {
        source: partita_runtime::SamplerSource::FaultSampling,
        ..Default::default()
    };
    p.start_numa_sampler(fault).unwrap();
    let v = p.node_vec(4 * 4096, |i| i as u8).unwrap();
    if partita_numa::online_nodes().len() < 2 {
        // One node: the sampler does not start, no page is ever armed.
        assert!(!p.stop_numa_sampler());
        assert_eq!(v[3 * 4096 + 1], 1);
        assert!(v.page_nodes().unwrap().iter().all(|s| s.node().is_some()));
    } else {
        assert!(p.stop_numa_sampler());
        assert!(!p.stop_numa_sampler());
    }
}

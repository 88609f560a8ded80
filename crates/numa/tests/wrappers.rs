//! The memory-policy and page-migration wrappers against the real system calls of this
//! (one-node or multi-node) machine: placement is where asked, errors are typed and name the
//! call, and nothing unsafe happens on bad input.

use partita_numa::counters::FaultSampler;
use partita_numa::{
    MbindFlags, MemPolicy, MoveScope, NodeBox, NodeSet, NodeVec, NumaError, PageRange, PageStatus,
    Placement, get_mempolicy, locate, locate_pages, mbind, migrate, migrate_batched, migrate_pages,
    move_pages_to, node_of_address, online_nodes, page_size, policy_at, set_mempolicy,
};
use std::sync::atomic::{AtomicU64, Ordering};

fn first_node() -> u32 {
    online_nodes().iter().next().unwrap()
}

fn absent_node() -> u32 {
    online_nodes().max().unwrap() + 1
}

#[test]
fn validation_errors_name_the_call() {
    let ps = page_size();
    let v = NodeVec::from_fn(4 * ps, Placement::FirstTouch, |_| 1u8).unwrap();
    let r = v.pages().unwrap();
    let bad = absent_node();
    let e = mbind(r, MemPolicy::Bind(NodeSet::single(bad)), MbindFlags::NONE).unwrap_err();
    assert!(
        matches!(e, NumaError::NoSuchNode { call: "mbind", node, .. } if node == bad),
        "{e}"
    );
    let e = mbind(r, MemPolicy::Interleave(NodeSet::new()), MbindFlags::NONE).unwrap_err();
    assert!(
        matches!(e, NumaError::InvalidArgument { call: "mbind", .. }),
        "{e}"
    );
    let e = migrate(r, bad).unwrap_err();
    assert!(
        matches!(
            e,
            NumaError::NoSuchNode {
                call: "move_pages",
                ..
            }
        ),
        "{e}"
    );
    let e = move_pages_to(&[r.start() + 1], first_node(), 1, MoveScope::Exclusive).unwrap_err();
    assert!(
        matches!(
            e,
            NumaError::Unaligned {
                call: "move_pages",
                ..
            }
        ),
        "{e}"
    );
    let e = migrate_batched(r, first_node(), 0, MoveScope::Exclusive).unwrap_err();
    assert!(
        matches!(
            e,
            NumaError::InvalidArgument {
                call: "move_pages",
                ..
            }
        ),
        "{e}"
    );
    let e = locate_pages(&[]).unwrap_err();
    assert!(
        matches!(e, NumaError::EmptyRange { call: "move_pages" }),
        "{e}"
    );
    let e = migrate_pages(None, &NodeSet::single(bad), &NodeSet::single(0)).unwrap_err();
    assert_eq!(e.call(), "migrate_pages");
    let e = set_mempolicy(MemPolicy::Preferred(bad)).unwrap_err();
    assert_eq!(e.call(), "set_mempolicy");
    assert!(matches!(
        PageRange::new(usize::MAX - ps + 1, 2 * ps),
        Err(NumaError::Overflow { .. })
    ));
    assert!(matches!(
        PageRange::new(ps, ps + 1),
        Err(NumaError::Unaligned { what: "length", .. })
    ));
    // Converting to io::Error keeps the call in the message.
    let io: std::io::Error = migrate(r, bad).unwrap_err().into();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert!(io.to_string().contains("move_pages"), "{io}");
}

#[test]
fn kernel_errors_are_typed() {
    let ps = page_size();
    // Unmapped memory: mbind fails with EFAULT/ENOMEM from the kernel, typed as Os.
    let far = PageRange::new(ps, ps).unwrap();
    match mbind(far, MemPolicy::Local, MbindFlags::NONE) {
        Err(NumaError::Os {
            call: "mbind",
            source,
        }) => {
            assert!(matches!(
                source.raw_os_error(),
                Some(libc::EFAULT) | Some(libc::ENOMEM)
            ))
        }
        other => panic!("mbind on unmapped memory: {other:?}"),
    }
    assert_eq!(locate(far).unwrap(), vec![PageStatus::Error(libc::EFAULT)]);
    assert!(matches!(
        policy_at(ps),
        Err(NumaError::Os {
            call: "get_mempolicy",
            ..
        })
    ));
}

#[test]
fn placements_land_on_the_node() {
    let n = first_node();
    let words = 64 * page_size() / 8;
    for p in [
        Placement::Node(n),
        Placement::Preferred(n),
        Placement::FirstTouchOn(n),
        Placement::Interleave(NodeSet::single(n)),
    ] {
        let v = NodeVec::from_fn(words, p, |i| i as u64).unwrap();
        let st = v.page_nodes().unwrap();
        assert_eq!(st.len(), 64);
        assert!(
            st.iter().all(|s| *s == PageStatus::Node(n)),
            "{p:?}: {st:?}"
        );
        assert!(v.iter().enumerate().all(|(i, x)| *x == i as u64));
        assert_eq!(node_of_address(v.as_ptr() as usize).unwrap(), n);
    }
    let expected = MemPolicy::Bind(NodeSet::single(n));
    let v = NodeVec::from_fn(words, Placement::Node(n), |i| i as u64).unwrap();
    assert_eq!(policy_at(v.as_ptr() as usize).unwrap(), expected);
}

#[test]
fn node_vec_drops_every_element_once() {
    use std::rc::Rc;
    let counter = Rc::new(());
    {
        let v = NodeVec::from_fn(1000, Placement::FirstTouch, |_| Rc::clone(&counter)).unwrap();
        assert_eq!(Rc::strong_count(&counter), 1001);
        drop(v);
    }
    assert_eq!(Rc::strong_count(&counter), 1);
    // Zero-sized and empty vectors have no pages, and say so.
    let z = NodeVec::from_fn(10, Placement::Node(first_node()), |_| ()).unwrap();
    assert_eq!(z.len(), 10);
    assert!(matches!(z.page_nodes(), Err(NumaError::EmptyRange { .. })));
    let b = NodeBox::new([3u32; 3000], Placement::Preferred(first_node())).unwrap();
    assert_eq!(b.iter().sum::<u32>(), 9000);
    assert_eq!(b.page_nodes().unwrap().len(), 3);
}

#[test]
fn move_and_query_batches() {
    let n = first_node();
    let v = NodeVec::from_fn(100 * page_size() / 8, Placement::FirstTouch, |i| i as u64).unwrap();
    for batch in [1, 3, 64, 1000] {
        let st = migrate_batched(v.pages().unwrap(), n, batch, MoveScope::Exclusive).unwrap();
        assert_eq!(st.len(), 100);
        assert!(st.iter().all(|s| *s == PageStatus::Node(n)));
    }
    assert_eq!(
        migrate_pages(None, &NodeSet::single(n), &NodeSet::single(n)).unwrap(),
        0
    );
    // Never-touched pages (a large allocation comes straight from mmap) are not present.
    let fresh: Vec<u8> = Vec::with_capacity(64 << 20);
    let ps = page_size();
    let start = (fresh.as_ptr() as usize).div_ceil(ps) * ps + 16 * ps;
    let st = locate(PageRange::new(start, 4 * ps).unwrap()).unwrap();
    assert!(st.iter().all(|s| *s == PageStatus::NotPresent), "{st:?}");
    let empty = NodeVec::from_fn(0, Placement::FirstTouch, |_| 0u8).unwrap();
    assert!(empty.pages().is_none());
}

#[test]
fn thread_policy_round_trip() {
    std::thread::spawn(|| {
        let n = first_node();
        for p in [
            MemPolicy::Bind(NodeSet::single(n)),
            MemPolicy::Preferred(n),
            MemPolicy::Interleave(NodeSet::single(n)),
            MemPolicy::Local,
            MemPolicy::Default,
        ] {
            set_mempolicy(p).unwrap();
            assert_eq!(get_mempolicy().unwrap(), p);
        }
    })
    .join()
    .unwrap();
}

#[test]
fn fault_sampler_counts_first_access_per_armed_page() {
    let wp = page_size() / 8;
    let v = NodeVec::from_fn(8 * wp, Placement::FirstTouch, |_| AtomicU64::new(0)).unwrap();
    let nodes = online_nodes().max().unwrap() as usize + 1;
    let s = FaultSampler::new(&v, nodes).unwrap();
    assert_eq!(s.arm_sample(2, 0).unwrap(), 4);
    for round in 0..3 {
        for p in 0..8 {
            v[p * wp + round].fetch_add(1, Ordering::Relaxed);
        }
    }
    let st = s.stats();
    assert_eq!(st.faults, 4, "{st:?}");
    for (p, counts) in st.per_node.iter().enumerate() {
        assert_eq!(
            counts.iter().sum::<u32>(),
            u32::from(p % 2 == 0),
            "page {p}"
        );
    }
    drop(s);
    // After the sampler is gone every page is accessible again and the data is intact.
    assert!(v.iter().step_by(wp).all(|x| x.load(Ordering::Relaxed) == 1));
}

#[test]
fn migrator_plans_and_moves_on_this_machine() {
    use partita_numa::driver::Migrator;
    use partita_numa::policy::{Action, CounterTable, Params};
    let n = first_node();
    let v = NodeVec::from_fn(8 * page_size(), Placement::Node(n), |_| 5u8).unwrap();
    let mut m = Migrator::new(v.pages().unwrap(), Params::with_trigger(4)).unwrap();
    let nodes = online_nodes().max().unwrap() as usize + 1;
    let mut t = CounterTable::new(8, nodes, 0);
    for _ in 0..10 {
        t.record(3, n as usize, false, 0);
    }
    // Hot only on the node that already holds it: nothing to do.
    assert!(m.plan(&t, 0, false).is_empty());
    // A forced plan to the same node goes through move_pages and clears the page's counters.
    let done = m
        .apply(&[(3, Action::Migrate { to: n as usize })], &mut t, 0)
        .unwrap();
    assert_eq!((done.migrated, done.failed), (1, 0));
    assert!(t.counters(3, 0).misses.iter().all(|c| *c == 0));
    assert!(v.iter().all(|x| *x == 5));
}

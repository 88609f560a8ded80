use super::*;
use crate::memfollow::pages::{self, Linux};
use partita_numa::numa_maps::Mapping;
use partita_numa::PageStatus;
use std::cell::RefCell;
use std::collections::HashMap;

const MS: u64 = 1_000_000;
const PAGE: usize = 4096;
/// The fake process's default-policy mapping (the heap) and its runtime-bound one.
const HEAP: usize = 0x7f00_0000_0000;
const BOUND: usize = 0x7f10_0000_0000;

/// A process's memory in a fake kernel: where each page is; every call counted; errors
/// injected per call.
#[derive(Default)]
struct Fake {
    pages: RefCell<HashMap<usize, u32>>,
    calls: RefCell<u64>,
    fail_locate: Option<i32>,
    /// Per-page status of every move (the pages stay where they are).
    refuse_moves: Option<i32>,
}

impl Fake {
    fn with(heap_pages: usize, bound_pages: usize) -> Fake {
        let f = Fake::default();
        for i in 0..heap_pages {
            f.pages.borrow_mut().insert(HEAP + i * PAGE, 0);
        }
        for i in 0..bound_pages {
            f.pages.borrow_mut().insert(BOUND + i * PAGE, 0);
        }
        f
    }
    fn on(&self, base: usize, node: u32) -> usize {
        let p = self.pages.borrow();
        p.iter()
            .filter(|(a, n)| **a >= base && **a < base + (1 << 32) && **n == node)
            .count()
    }
    fn calls(&self) -> u64 {
        *self.calls.borrow()
    }
}

impl Kernel for &Fake {
    fn mappings(&self, _pid: u32) -> Result<Vec<Mapping>, NumaError> {
        *self.calls.borrow_mut() += 1;
        let mapping = |start: usize, policy: &str| {
            let p = self.pages.borrow();
            let mine: Vec<u32> = p
                .iter()
                .filter(|(a, _)| **a >= start && **a < start + (1 << 32))
                .map(|(_, n)| *n)
                .collect();
            let mut nodes = std::collections::BTreeMap::new();
            for n in &mine {
                *nodes.entry(*n).or_insert(0u64) += 1;
            }
            Mapping {
                start,
                end: start + mine.len() * PAGE,
                policy: policy.into(),
                anon: mine.len() as u64,
                nodes,
            }
        };
        Ok(vec![mapping(HEAP, "default"), mapping(BOUND, "prefer:0")])
    }
    fn locate(&self, _pid: u32, addrs: &[usize]) -> Result<Vec<PageStatus>, NumaError> {
        *self.calls.borrow_mut() += 1;
        if let Some(e) = self.fail_locate {
            return Err(NumaError::Os {
                call: "move_pages",
                source: std::io::Error::from_raw_os_error(e),
            });
        }
        let p = self.pages.borrow();
        Ok(addrs
            .iter()
            .map(|a| {
                p.get(a)
                    .map_or(PageStatus::NotPresent, |n| PageStatus::Node(*n))
            })
            .collect())
    }
    fn move_to(&self, _pid: u32, addrs: &[usize], node: u32) -> Result<Vec<PageStatus>, NumaError> {
        *self.calls.borrow_mut() += 1;
        if let Some(e) = self.refuse_moves {
            return Ok(vec![PageStatus::Error(e); addrs.len()]);
        }
        let mut p = self.pages.borrow_mut();
        for a in addrs {
            assert!(*a < BOUND, "moved a page of the runtime's bound mapping");
            p.insert(*a, node);
        }
        Ok(vec![PageStatus::Node(node); addrs.len()])
    }
    fn opted_out(&self, _pid: i32, name: &str, exclude: &[String]) -> Option<&'static str> {
        exclude
            .iter()
            .any(|n| n == name)
            .then_some("numa_migration.exclude")
    }
}

fn view(proc: &ProcRef, name: &str, nodes: &[u32]) -> View {
    View {
        id: 1,
        proc: proc.clone(),
        name: name.into(),
        cpu_nodes: nodes.to_vec(),
    }
}

fn me() -> ProcRef {
    ProcRef::open(std::process::id() as i32).unwrap()
}

/// Rounds every `step_ms` from `from_ms` to `to_ms`, with `nodes(t)` as the app's placement.
fn run(
    m: &mut Mover<&Fake>,
    proc: &ProcRef,
    (from_ms, to_ms, step_ms): (u64, u64, u64),
    nodes: impl Fn(u64) -> Vec<u32>,
) {
    for t in (from_ms..to_ms).step_by(step_ms as usize) {
        let v = [view(proc, "app", &nodes(t))];
        m.round(Some(&v), t * MS);
    }
}

#[test]
fn one_node_makes_no_call() {
    let fake = Fake::with(1000, 10);
    let stats = Arc::new(Stats::default());
    let mut m = Mover::new(&fake, Params::default(), 1, vec![], stats.clone());
    let p = me();
    // Even with placements that change (which one node cannot have), nothing is asked.
    run(&mut m, &p, (0, 5000, 5), |t| vec![(t / 1000 % 2) as u32]);
    assert_eq!(fake.calls(), 0);
    let s = stats.snapshot();
    assert_eq!((s.calls, s.rounds), (0, 1000));
    assert_eq!(stats.app(1).unwrap().state, "off: one NUMA node");
}

#[test]
fn memory_follows_after_break_even_paced_and_leaves_bound_memory() {
    let fake = Fake::with(20_000, 64);
    let stats = Arc::new(Stats::default());
    let params = Params {
        budget_bytes_per_s: 256 << 20, // 65536 pages/s: 20000 pages in ~0.3 s
        ..Params::default()
    };
    let be = params.break_even().unwrap().as_millis() as u64;
    let mut m = Mover::new(&fake, params, 2, vec![], stats.clone());
    let p = me();
    run(&mut m, &p, (0, 1000, 5), |_| vec![0]);
    assert_eq!(fake.calls(), 1, "one count, nothing stray");
    run(&mut m, &p, (1000, 1000 + be, 5), |_| vec![1]);
    assert_eq!(fake.calls(), 1, "nothing before the cost rule is met");
    assert!(stats.app(1).unwrap().state.starts_with("waiting"));
    let mut t = 1000 + be;
    let mut moved_by = Vec::new();
    while t < 3000 {
        run(&mut m, &p, (t, t + 5, 5), |_| vec![1]);
        moved_by.push(fake.on(HEAP, 1));
        t += 5;
    }
    assert_eq!(fake.on(HEAP, 1), 20_000);
    assert_eq!(
        fake.on(BOUND, 0),
        64,
        "the runtime's bound memory is not the manager's"
    );
    // Paced: by any round, no more than the budget since the cost rule was met plus one burst
    // (100 ms of budget) plus one query chunk of overshoot.
    let per_s = (256u64 << 20) / PAGE as u64;
    for (i, moved) in moved_by.iter().enumerate() {
        let elapsed_ms = 5 * (i as u64 + 1);
        let cap = per_s * elapsed_ms / 1000 + per_s / 10 + pages::CHUNK as u64;
        assert!(*moved as u64 <= cap, "round {i}: {moved} > {cap}");
    }
    let r = stats.app(1).unwrap();
    assert_eq!(r.moved_bytes, 20_000 * PAGE as u64);
    assert_eq!(r.moves, 1);
    assert!(r.state.starts_with("done"), "{}", r.state);
    assert_eq!(stats.snapshot().migrations, 1);
}

#[test]
fn flapping_faster_than_break_even_is_never_migrated() {
    let fake = Fake::with(1000, 0);
    let stats = Arc::new(Stats::default());
    let params = Params::default();
    let period = params.break_even().unwrap().as_millis() as u64 / 2;
    let mut m = Mover::new(&fake, params, 2, vec![], stats.clone());
    let p = me();
    // Start on node 1 (pages on 0), then flip every `period` for 10 s.
    run(&mut m, &p, (0, 10_000, 5), |t| {
        vec![1 - (t / period % 2) as u32]
    });
    assert_eq!(fake.on(HEAP, 1), 0);
    let r = stats.app(1).unwrap();
    let flips = 10_000 / period;
    assert!(r.moves >= flips - 1, "{} moves counted of {flips}", r.moves);
    // Counting on node 0 placements (nothing stray there) is all it ever did.
    assert!(
        stats.snapshot().moved_bytes == 0 && stats.snapshot().migrations == 0,
        "{:?}",
        stats.snapshot()
    );
}

#[test]
fn opted_out_by_config_is_never_touched() {
    let fake = Fake::with(1000, 0);
    let stats = Arc::new(Stats::default());
    let mut m = Mover::new(
        &fake,
        Params::default(),
        2,
        vec!["app".into()],
        stats.clone(),
    );
    run(&mut m, &me(), (0, 2000, 5), |t| vec![(t / 1000) as u32]);
    assert_eq!(fake.calls(), 0);
    assert_eq!(stats.app(1).unwrap().state, "off: numa_migration.exclude");
}

/// EPERM: logged once, never tried again for that application, whatever its placements.
#[test]
fn not_permitted_is_tried_once() {
    let fake = Fake {
        fail_locate: Some(libc::EPERM),
        ..Fake::with(1000, 0)
    };
    let stats = Arc::new(Stats::default());
    let mut m = Mover::new(&fake, Params::default(), 2, vec![], stats.clone());
    run(&mut m, &me(), (0, 10_000, 5), |t| {
        vec![1 - (t / 1000 % 2) as u32]
    });
    // One numa_maps read and one failed move_pages query, then nothing more.
    assert_eq!(fake.calls(), 2);
    assert_eq!(stats.snapshot().errors, 1);
    let r = stats.app(1).unwrap();
    assert!(r.state.contains("move_pages failed"), "{}", r.state);
}

/// ENOMEM per page (the destination node is full): this placement's migration ends after
/// one slice; the next placement tries again, once.
#[test]
fn a_full_destination_ends_the_placement_not_the_manager() {
    let fake = Fake {
        refuse_moves: Some(libc::ENOMEM),
        ..Fake::with(1000, 0)
    };
    let stats = Arc::new(Stats::default());
    let mut m = Mover::new(&fake, Params::default(), 2, vec![], stats.clone());
    let p = me();
    run(&mut m, &p, (0, 3000, 5), |_| vec![1]);
    let after_one = fake.calls();
    assert_eq!(after_one, 4, "one count, one chunk: query, move, query");
    assert_eq!(stats.snapshot().errors, 1);
    assert!(stats
        .app(1)
        .unwrap()
        .state
        .contains("Cannot allocate memory"));
    // Back to node 0 (nothing stray), then to node 1 again: one more attempt.
    run(&mut m, &p, (3000, 4000, 5), |_| vec![0]);
    run(&mut m, &p, (4000, 7000, 5), |_| vec![1]);
    assert!(fake.calls() <= 2 * after_one + 1, "{} calls", fake.calls());
    assert_eq!(stats.snapshot().errors, 2);
}

/// A move that answers for every page (on the destination) is not asked about again: one
/// count, then per slice its queries and the move, nothing more.
#[test]
fn a_move_that_answers_for_every_page_is_not_asked_again() {
    let fake = Fake::with(1000, 0);
    let stats = Arc::new(Stats::default());
    let mut m = Mover::new(&fake, Params::default(), 2, vec![], stats.clone());
    run(&mut m, &me(), (0, 3000, 5), |_| vec![1]);
    assert_eq!(fake.on(HEAP, 1), 1000);
    // Count, query, move; then the second count finds nothing stray.
    assert_eq!(fake.calls(), 4);
    assert_eq!(stats.app(1).unwrap().moved_bytes, 1000 * PAGE as u64);
}

/// An application that exits during its migration: the next slice sees its pidfd closed,
/// asks the kernel nothing more about its pid, and says so.
#[test]
fn an_application_exiting_mid_migration_is_dropped_quietly() {
    let fake = Fake::with(100_000, 0);
    let stats = Arc::new(Stats::default());
    let params = Params {
        budget_bytes_per_s: 64 << 20,
        ..Params::default()
    };
    let mut m = Mover::new(&fake, params, 2, vec![], stats.clone());
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let p = ProcRef::open(child.id() as i32).unwrap();
    run(&mut m, &p, (0, 400, 5), |_| vec![1]);
    let moving = fake.on(HEAP, 1);
    assert!(moving > 0 && moving < 100_000, "{moving}");
    child.kill().unwrap();
    child.wait().unwrap();
    let calls = fake.calls();
    run(&mut m, &p, (400, 3000, 5), |_| vec![1]);
    assert_eq!(fake.calls(), calls);
    assert_eq!(stats.app(1).unwrap().state, "exited");
    assert_eq!(stats.snapshot().errors, 1);
}

/// The real calls on a process that is gone fail with ESRCH, naming the call.
#[test]
fn the_real_calls_name_themselves_on_a_gone_process() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let e = Linux.locate(pid, &[PAGE]).unwrap_err();
    assert_eq!(e.call(), "move_pages");
    assert!(e.to_string().contains("move_pages failed"), "{e}");
    let e = Linux.mappings(pid).unwrap_err();
    assert!(e.to_string().contains("numa_maps"), "{e}");
}

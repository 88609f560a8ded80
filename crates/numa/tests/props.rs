//! Property tests for numa.md's invariants 1–5.

use partita_numa::counters::AccessHints;
use partita_numa::policy::{
    Action, CopySet, CounterTable, NoAction, PageCounters, PageState, Params, decide,
};
use partita_numa::sim::{Access, SimConfig, Simulator};
use partita_numa::{
    MbindFlags, MemPolicy, MoveScope, NodeSet, NodeVec, PageRange, Placement, Replicated, locate,
    mbind, migrate_batched, move_pages_to, page_size,
};
use proptest::prelude::*;

// ---- Invariant 1: decision table -------------------------------------------------------

fn copyset(nodes: usize) -> impl Strategy<Value = CopySet> {
    (0..nodes, proptest::collection::vec(0..nodes, 0..nodes)).prop_map(|(m, reps)| {
        let mut c = CopySet::new(m);
        for r in reps {
            c.replicate(r);
        }
        c
    })
}

prop_compose! {
    fn decision_input()(nodes in 1usize..8)(
        misses in proptest::collection::vec(prop_oneof![0u32..40, 100u32..300], nodes),
        writes in 0u32..4,
        requester in 0..nodes,
        trigger in 1u32..200,
        sharing in 0u32..60,
        write_threshold in 1u32..3,
        cooldown in 0u64..1000,
        copies in copyset(nodes),
        last in proptest::option::of(0u64..2000),
        now in 0u64..3000,
        pressure in any::<bool>(),
        free in any::<bool>(),
        lock in any::<bool>(),
    ) -> (PageCounters, Params, PageState) {
        let params = Params { trigger, sharing, write_threshold, cooldown_ns: cooldown, ..Params::default() };
        let state = PageState {
            copies, last_migration_ns: last, now_ns: now,
            memory_pressure: pressure, target_has_free_page: free, lock_available: lock,
        };
        (PageCounters { misses, writes, requester }, params, state)
    }
}

/// numa.md's decision table, written as one expression per row.
fn oracle(c: &PageCounters, p: &Params, s: &PageState) -> Action {
    let n = c.requester;
    let mine = c.misses[n];
    let others_max = c
        .misses
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != n)
        .map(|(_, v)| *v)
        .max();
    let shared = others_max.is_some_and(|m| m > p.sharing);
    let written = c.writes >= p.write_threshold;
    let cooling = s
        .last_migration_ns
        .is_some_and(|t| s.now_ns.saturating_sub(t) < p.cooldown_ns);
    use NoAction::*;
    match () {
        _ if mine < p.trigger => Action::None(BelowTrigger),
        _ if s.copies.master() == n => Action::None(AlreadyLocal),
        _ if !s.lock_available => Action::None(LockBusy),
        _ if s.copies.has_replica_on(n) => Action::Rearrange { to: n },
        _ if shared && written => Action::None(SharedWritten),
        _ if shared && s.memory_pressure => Action::None(MemoryPressure),
        _ if shared && !s.target_has_free_page => Action::None(NoFreePage),
        _ if shared => Action::Replicate { on: n },
        _ if cooling => Action::None(CoolDown),
        _ if !s.target_has_free_page => Action::None(NoFreePage),
        _ => Action::Migrate { to: n },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn inv1_decision_table((c, p, s) in decision_input()) {
        prop_assert_eq!(decide(&c, &p, &s), oracle(&c, &p, &s));
    }

    // ---- Invariant 4: optimism ---------------------------------------------------------
    #[test]
    fn inv4_busy_lock_or_no_free_page_changes_nothing((c, p, mut s) in decision_input(), which in 0..3u8) {
        if which & 1 == 0 { s.lock_available = false } else { s.target_has_free_page = false }
        let before = s.copies;
        let action = decide(&c, &p, &s);
        if !s.lock_available {
            prop_assert!(matches!(action, Action::None(_)), "{:?}", action);
        } else {
            prop_assert!(!action.is_move(), "{:?}", action);
        }
        let mut after = s.copies;
        match action {
            Action::None(_) => {}
            Action::Rearrange { .. } => {} // remapping only: copies untouched
            Action::Replicate { on } => { after.replicate(on); }
            Action::Migrate { to } => { after.migrate(to); }
        }
        prop_assert_eq!(before, after);
    }
}

// ---- Invariant 2: copy sets --------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Write(u64),
    Replicate(usize),
    Migrate(usize),
    Collapse,
    Reclaim(usize),
}

fn op(nodes: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<u64>().prop_map(Op::Write),
        (0..nodes).prop_map(Op::Replicate),
        (0..nodes).prop_map(Op::Migrate),
        Just(Op::Collapse),
        (0..nodes).prop_map(Op::Reclaim),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn inv2_simulator_keeps_copy_sets_valid(
        accesses in proptest::collection::vec((0usize..4, 0usize..6, any::<bool>()), 1..1500),
        trigger in 1u32..16,
    ) {
        simulator_case(accesses, trigger)?;
    }
}

fn simulator_case(accesses: Vec<(usize, usize, bool)>, trigger: u32) -> Result<(), TestCaseError> {
    let cfg = SimConfig {
        params: Params {
            trigger,
            sharing: trigger / 4,
            cooldown_ns: 50,
            reset_interval_ns: 2_000,
            ..Params::default()
        },
        ..SimConfig::default()
    };
    let mut s = Simulator::new(4, 4, &[0, 1, 2, 3, 0, 0], cfg);
    for (i, (node, page, write)) in accesses.into_iter().enumerate() {
        s.step(&Access {
            time_ns: i as u64 * 10,
            process: node,
            node,
            page,
            write: write && i % 3 == 0,
        });
        if let Err(e) = s.check_invariants() {
            return Err(TestCaseError::fail(e));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn inv2_copyset_model(ops in proptest::collection::vec(op(8), 0..60)) {
        // A copy set plus the value every copy holds; writes collapse first (a write to a
        // replicated page collapses it), as the simulator and Replicated do.
        let mut c = CopySet::new(0);
        let mut held = [None::<u64>; 8];
        held[0] = Some(0);
        let mut last = 0u64;
        for o in ops {
            match o {
                Op::Write(v) => {
                    if !c.writable() { for n in c.nodes().into_iter().skip(1) { held[n] = None; } c.collapse(); }
                    prop_assert!(c.writable());
                    held[c.master()] = Some(v);
                    last = v;
                }
                Op::Replicate(n) => { if c.replicate(n) { held[n] = held[c.master()]; } }
                Op::Migrate(n) => { let m = c.master(); if c.migrate(n) { held[n] = held[m]; held[m] = None; } }
                Op::Collapse => { for n in c.nodes().into_iter().skip(1) { held[n] = None; } c.collapse(); }
                Op::Reclaim(n) => {
                    let before = c.copies();
                    if c.reclaim(n) { held[n] = None; prop_assert_eq!(c.copies(), before - 1); }
                    else { prop_assert!(before == 1 || !c.has_copy_on(n)); }
                }
            }
            let nodes = c.nodes();
            prop_assert!(!nodes.is_empty());
            let mut dedup = nodes.clone(); dedup.sort(); dedup.dedup();
            prop_assert_eq!(dedup.len(), nodes.len(), "one copy per node");
            prop_assert_eq!(c.writable(), nodes.len() == 1, "writable only with one copy");
            for (n, h) in held.iter().enumerate() {
                prop_assert_eq!(h.is_some(), c.has_copy_on(n));
                if let Some(v) = *h { prop_assert_eq!(v, last, "copy on {} is stale", n); }
            }
        }
    }

    #[test]
    fn inv2_replicated_value(ops in proptest::collection::vec(op(3), 0..30)) {
        // On this machine only the online nodes exist; other nodes must be refused cleanly.
        let mut r = Replicated::on([0u64; 64], 0).unwrap();
        let mut last = 0u64;
        for o in ops {
            match o {
                Op::Write(v) => { r.update(|x| x.fill(v)); last = v; }
                Op::Replicate(n) => { let _ = r.replicate_on(n as u32); }
                Op::Migrate(n) => { let _ = r.migrate_master(n as u32); }
                Op::Collapse => r.collapse(),
                Op::Reclaim(n) => { let before = r.copy_nodes().len(); let gone = r.reclaim(n as u32);
                    prop_assert!(!(gone && before == 1), "reclaimed the last copy"); }
            }
            let nodes = r.copy_nodes();
            prop_assert!(!nodes.is_empty());
            prop_assert!(r.get().iter().all(|x| *x == last));
            for n in nodes { prop_assert!(r.get_on(n as u32).unwrap().iter().all(|x| *x == last)); }
        }
    }

    // ---- Invariant 3: counter hygiene ------------------------------------------------------
    #[test]
    fn inv3_counter_hygiene(
        events in proptest::collection::vec((0usize..8, 0usize..4, any::<bool>(), 0u64..50), 0..300),
        interval in 1u64..2000,
    ) {
        let mut t = CounterTable::new(8, 4, interval);
        let mut now = 0;
        let mut since_reset = [0u32; 32];
        let mut epoch = 0;
        for (page, node, write, dt) in events {
            now += dt;
            if now / interval != epoch { epoch = now / interval; since_reset.fill(0); }
            since_reset[page * 4 + node] += 1;
            let c = t.record(page, node, write, now);
            prop_assert_eq!(c, since_reset[page * 4 + node], "count since the last reset");
            if write && page == 7 {
                // Acting on a page: the new page starts at zero.
                t.clear_page(7);
                since_reset[28..32].fill(0);
                prop_assert!(t.counters(7, 0).misses.iter().all(|x| *x == 0));
                prop_assert_eq!(t.counters(7, 0).writes, 0);
            }
        }
        // After a full reset interval with no events, everything is zero.
        t.tick(now + interval);
        for p in 0..8 { prop_assert!(t.counters(p, 0).misses.iter().all(|x| *x == 0)); prop_assert_eq!(t.counters(p, 0).writes, 0); }
    }

    #[test]
    fn inv3_sampled_counts_never_exceed_true_counts(
        touches in proptest::collection::vec((0usize..40_000, 1usize..20_000, 0usize..3), 0..200),
        every in 1u32..8,
    ) {
        let ps = page_size();
        let base = 1 << 30;
        let mut h = AccessHints::new(base, 8 * ps, 3, every, 0);
        for (off, len, node) in touches {
            h.touch(base + off, len, node, false, 0);
        }
        for p in 0..8 { for n in 0..3 {
            prop_assert!(u64::from(h.table().counters(p, n).misses[n]) <= h.true_count(p, n));
        } }
    }

    // ---- Invariant 5: wrapper safety on the real syscalls ----------------------------------
    #[test]
    fn inv5_wrappers_never_crash_or_corrupt(
        calls in proptest::collection::vec(
            (0u8..4, any::<usize>(), 0u8..3, any::<usize>(), 0u32..5, 0u32..8, 0u8..5, 1usize..70),
            1..40),
    ) {
        let ps = page_size();
        let words = 16 * ps / 8;
        let target = NodeVec::from_fn(words, Placement::FirstTouch, |i| i as u64).unwrap();
        let canary = NodeVec::from_fn(words, Placement::FirstTouch, |i| !(i as u64)).unwrap();
        let base = target.as_ptr() as usize;
        for (sk, s, lk, l, node, flags, which, batch) in calls {
            let start = match sk { 0 => base + (s % 20) * ps, 1 => base + s % (20 * ps), 2 => s, _ => s & !(ps - 1) & ((1 << 47) - 1) };
            let len = match lk { 0 => (l % 20) * ps, 1 => l % (20 * ps), _ => l };
            let flags = MbindFlags::from_bits(flags).unwrap_or(MbindFlags::NONE);
            let res = PageRange::new(start, len).and_then(|r| {
                let capped = PageRange::new(r.start(), r.len().min(64 * ps)).unwrap_or(r);
                match which {
                    0 => mbind(r, MemPolicy::Bind(NodeSet::single(node)), flags),
                    1 => mbind(r, MemPolicy::Interleave([0, node].into_iter().collect()), flags),
                    2 => migrate_batched(capped, node, batch, MoveScope::Exclusive).map(drop),
                    3 => locate(capped).map(drop),
                    _ => move_pages_to(&[start], node, batch, MoveScope::Exclusive).map(drop),
                }
            });
            // Either outcome is fine; an error must name its call.
            if let Err(e) = res { prop_assert!(!e.call().is_empty()); prop_assert!(!e.to_string().is_empty()); }
        }
        if let Some(r) = target.pages() { let _ = mbind(r, MemPolicy::Default, MbindFlags::NONE); }
        prop_assert!(target.iter().enumerate().all(|(i, x)| *x == i as u64));
        prop_assert!(canary.iter().enumerate().all(|(i, x)| *x == !(i as u64)));
    }
}

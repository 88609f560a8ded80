//! The program the two-NUMA-node VM test runs inside QEMU (built static by
//! `vm/numa/run.sh` as the `numa-vm-guest` binary of partita-numa-vm). It checks
//! topology, page moves, `mbind` with `MPOL_MF_MOVE`, interleaving, the first-touch helper, `Replicated<T>` placement, fault sampling and wrapper
//! safety on a real two-node kernel, and measures `move_pages` per-page cost for batch sizes
//! 1…512 through the wrapper and through the raw system call.
//!
//! Output protocol (one line each, parsed by `vm/numa/tests/vm.rs`):
//! `PARTITA-NUMA CHECK <name> PASS|FAIL <detail>`, `PARTITA-NUMA INFO <key> <value>`,
//! `PARTITA-NUMA BENCH batch=<n> pages=<p> raw_ns_per_page=<x> wrapper_ns_per_page=<y>`,
//! and finally `PARTITA-NUMA DONE checks=<n> failed=<m>`.
//!
//! Run on any machine it only reports what fails there (a one-node machine fails the
//! two-node checks by design).

use partita_numa::counters::{numa_balancing, probe, FaultSampler};
use partita_numa::{
    locate, locate_pages, mbind, migrate_pages, move_pages_to, node_of_address, online_nodes,
    page_size, placement::first_touch_on, MbindFlags, MemPolicy, MoveScope, NodeSet, NodeVec,
    NumaError, PageRange, PageStatus, Placement, Replicated, Topology,
};
use partita_stats::median;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

struct Checks {
    run: u32,
    failed: u32,
}

impl Checks {
    fn check(&mut self, name: &str, result: Result<String, String>) {
        self.run += 1;
        match result {
            Ok(detail) => println!("PARTITA-NUMA CHECK {name} PASS {detail}"),
            Err(detail) => {
                self.failed += 1;
                println!("PARTITA-NUMA CHECK {name} FAIL {detail}");
            }
        }
    }
}

fn e(err: NumaError) -> String {
    err.to_string()
}

fn count_on(st: &[PageStatus], node: u32) -> usize {
    st.iter().filter(|s| s.node() == Some(node)).count()
}

fn all_on(what: &str, st: &[PageStatus], node: u32) -> Result<String, String> {
    if count_on(st, node) == st.len() {
        Ok(format!("{what}: {} pages on node {node}", st.len()))
    } else {
        Err(format!(
            "{what}: expected all {} pages on node {node}, got {st:?}",
            st.len()
        ))
    }
}

const PAGES: usize = 64;

fn words_per_page() -> usize {
    page_size() / 8
}

fn pattern(i: usize) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn topology() -> Result<String, String> {
    let t = Topology::current().map_err(e)?;
    let ids: Vec<u32> = t.nodes().iter().map(|n| n.id).collect();
    if ids != [0, 1] {
        return Err(format!("nodes {ids:?}"));
    }
    let cpus: Vec<Vec<u32>> = t.nodes().iter().map(|n| n.cpus.clone()).collect();
    if cpus != [vec![0], vec![1]] {
        return Err(format!("cpus per node {cpus:?}"));
    }
    let d = (t.distance(0, 0), t.distance(0, 1));
    if d.0 != Some(10) || d.1.is_none_or(|x| x <= 10) {
        return Err(format!("distances {d:?}"));
    }
    let mem: Vec<u64> = t.nodes().iter().map(|n| n.memory_bytes >> 20).collect();
    if mem.iter().any(|m| *m < 100) {
        return Err(format!("memory MiB per node {mem:?}"));
    }
    if online_nodes() != [0, 1].into_iter().collect() {
        return Err(format!("online nodes {}", online_nodes()));
    }
    Ok(format!(
        "nodes {ids:?} cpus {cpus:?} distance(0,1)={:?} MiB {mem:?}",
        d.1
    ))
}

fn move_round_trip() -> Result<String, String> {
    let v = NodeVec::from_fn(PAGES * words_per_page(), Placement::Node(0), pattern).map_err(e)?;
    all_on("initial bind", &v.page_nodes().map_err(e)?, 0)?;
    all_on("move to 1", &v.migrate(1).map_err(e)?, 1)?;
    all_on("query after move to 1", &v.page_nodes().map_err(e)?, 1)?;
    if !v.iter().enumerate().all(|(i, x)| *x == pattern(i)) {
        return Err("data changed by the move to node 1".into());
    }
    all_on("move back to 0", &v.migrate(0).map_err(e)?, 0)?;
    all_on("query after move to 0", &v.page_nodes().map_err(e)?, 0)?;
    if !v.iter().enumerate().all(|(i, x)| *x == pattern(i)) {
        return Err("data changed by the move back".into());
    }
    // get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR) agrees with move_pages.
    let n = node_of_address(v.as_ptr() as usize).map_err(e)?;
    if n != 0 {
        return Err(format!("get_mempolicy says node {n}"));
    }
    Ok(format!("{PAGES} pages 0 -> 1 -> 0, data intact"))
}

fn partial_move() -> Result<String, String> {
    let v = NodeVec::from_fn(PAGES * words_per_page(), Placement::Node(0), pattern).map_err(e)?;
    let wp = words_per_page();
    let st = v.migrate_elements(8 * wp..16 * wp, 1).map_err(e)?;
    all_on("moved pages", &st, 1)?;
    let all = v.page_nodes().map_err(e)?;
    let expect: Vec<u32> = (0..PAGES)
        .map(|p| if (8..16).contains(&p) { 1 } else { 0 })
        .collect();
    let got: Vec<u32> = all.iter().map(|s| s.node().unwrap_or(99)).collect();
    if got != expect {
        return Err(format!("page nodes {got:?}"));
    }
    Ok("pages 8..16 on node 1, the rest on node 0".into())
}

fn mbind_move() -> Result<String, String> {
    let v = NodeVec::from_fn(PAGES * words_per_page(), Placement::Node(0), pattern).map_err(e)?;
    let r = v.pages().ok_or("no pages")?;
    mbind(
        r,
        MemPolicy::Bind(NodeSet::single(1)),
        MbindFlags::MOVE | MbindFlags::STRICT,
    )
    .map_err(e)?;
    all_on(
        "after mbind(MPOL_BIND {1}, MOVE|STRICT)",
        &v.page_nodes().map_err(e)?,
        1,
    )?;
    mbind(r, MemPolicy::Preferred(0), MbindFlags::MOVE).map_err(e)?;
    all_on(
        "after mbind(MPOL_PREFERRED 0, MOVE)",
        &v.page_nodes().map_err(e)?,
        0,
    )?;
    // Without MOVE, existing pages stay; STRICT then reports that they do not conform.
    match mbind(r, MemPolicy::Bind(NodeSet::single(1)), MbindFlags::STRICT) {
        Err(NumaError::Os { source, .. }) if source.raw_os_error() == Some(libc::EIO) => {}
        other => return Err(format!("STRICT without MOVE on misplaced pages: {other:?}")),
    }
    if !v.iter().enumerate().all(|(i, x)| *x == pattern(i)) {
        return Err("data changed".into());
    }
    Ok("MPOL_MF_MOVE moved all pages both ways; STRICT alone gave EIO".into())
}

fn interleave() -> Result<String, String> {
    let both: NodeSet = [0, 1].into_iter().collect();
    let v = NodeVec::from_fn(
        PAGES * words_per_page(),
        Placement::Interleave(both),
        pattern,
    )
    .map_err(e)?;
    let st = v.page_nodes().map_err(e)?;
    let (a, b) = (count_on(&st, 0), count_on(&st, 1));
    let alternating = st.windows(2).all(|w| w[0] != w[1]);
    if a + b != PAGES || a.abs_diff(b) > 1 || !alternating {
        return Err(format!(
            "interleave gave {a} on node 0, {b} on node 1: {st:?}"
        ));
    }
    Ok(format!("{a} pages on node 0, {b} on node 1, alternating"))
}

fn mempolicy_thread() -> Result<String, String> {
    std::thread::spawn(|| -> Result<String, String> {
        partita_numa::set_mempolicy(MemPolicy::Preferred(1)).map_err(e)?;
        let got = partita_numa::get_mempolicy().map_err(e)?;
        if got != MemPolicy::Preferred(1) {
            return Err(format!("get_mempolicy returned {got:?}"));
        }
        let v =
            NodeVec::from_fn(16 * words_per_page(), Placement::FirstTouch, pattern).map_err(e)?;
        all_on("thread policy preferred 1", &v.page_nodes().map_err(e)?, 1)?;
        partita_numa::set_mempolicy(MemPolicy::Default).map_err(e)?;
        Ok("set/get_mempolicy(PREFERRED 1) placed new pages on node 1".into())
    })
    .join()
    .map_err(|_| "thread panicked".to_string())?
}

fn first_touch() -> Result<String, String> {
    let v =
        NodeVec::from_fn(16 * words_per_page(), Placement::FirstTouchOn(1), pattern).map_err(e)?;
    all_on("first touch on node 1", &v.page_nodes().map_err(e)?, 1)?;
    let w = first_touch_on(0, || vec![1u8; 64 * page_size()]).map_err(e)?;
    let ps = page_size();
    let start = (w.as_ptr() as usize).div_ceil(ps) * ps;
    let st = locate(PageRange::new(start, 32 * ps).map_err(e)?).map_err(e)?;
    all_on("first_touch_on(0) Vec", &st, 0)?;
    Ok("FirstTouchOn(1) and first_touch_on(0) placed pages on their nodes".into())
}

fn whole_process() -> Result<String, String> {
    let v =
        NodeVec::from_fn(16 * words_per_page(), Placement::FirstTouchOn(0), pattern).map_err(e)?;
    all_on("before", &v.page_nodes().map_err(e)?, 0)?;
    migrate_pages(None, &NodeSet::single(0), &NodeSet::single(1)).map_err(e)?;
    all_on("migrate_pages 0 -> 1", &v.page_nodes().map_err(e)?, 1)?;
    migrate_pages(None, &NodeSet::single(1), &NodeSet::single(0)).map_err(e)?;
    all_on("migrate_pages 1 -> 0", &v.page_nodes().map_err(e)?, 0)?;
    Ok("migrate_pages moved the process's pages 0 -> 1 -> 0".into())
}

fn replicated() -> Result<String, String> {
    let mut r = Replicated::on([7u8; 8192], 0).map_err(e)?;
    r.replicate_everywhere().map_err(e)?;
    if r.copy_nodes() != [0, 1] {
        return Err(format!("copies on {:?}", r.copy_nodes()));
    }
    for node in [0u32, 1] {
        let copy = r.get_on(node).ok_or("missing copy")?;
        let range = PageRange::covering(&copy[..]).map_err(e)?;
        all_on(
            &format!("copy for node {node}"),
            &locate(range).map_err(e)?,
            node,
        )?;
    }
    r.update(|v| v[0] = 9);
    if r.get_on(1).map(|v| v[0]) != Some(9) {
        return Err("write not visible in the node-1 copy".into());
    }
    Ok("one copy per node, each on its node; a write updated both".into())
}

fn fault_sampling() -> Result<String, String> {
    let v = NodeVec::from_fn(32 * words_per_page(), Placement::Node(0), |_| {
        AtomicU64::new(0)
    })
    .map_err(e)?;
    let s = FaultSampler::new(&v, 2).map_err(e)?;
    s.arm_all().map_err(e)?;
    let wp = words_per_page();
    first_touch_on(1, || {
        for p in 0..16 {
            v[p * wp].fetch_add(1, Ordering::Relaxed);
        }
    })
    .map_err(e)?;
    for p in 16..32 {
        v[p * wp].fetch_add(1, Ordering::Relaxed);
    }
    let st = s.stats();
    let on1: u32 = st.per_node[..16].iter().map(|c| c[1]).sum();
    if on1 != 16 || st.faults != 32 {
        return Err(format!(
            "faults {} (node 1 on pages 0..16: {on1})",
            st.faults
        ));
    }
    Ok("32 sampled faults, node-1 thread's 16 attributed to node 1".into())
}

/// The policy end to end: access hints from two nodes → plan → batched migrations.
fn policy_driver() -> Result<String, String> {
    use partita_numa::counters::AccessHints;
    use partita_numa::driver::Migrator;
    use partita_numa::policy::{Action, Params};
    let ps = page_size();
    let v =
        NodeVec::from_fn(48 * words_per_page(), Placement::FirstTouchOn(0), pattern).map_err(e)?;
    let r = v.pages().ok_or("no pages")?;
    let mut hints = AccessHints::new(r.start(), r.len(), 2, 1, 0);
    for _ in 0..200 {
        hints.touch(r.start(), 16 * ps, 1, false, 0); // pages 0..16: node 1 only
        hints.touch(r.start() + 16 * ps, 16 * ps, 0, false, 0); // 16..32: node 0 (local)
        hints.touch(r.start() + 32 * ps, 16 * ps, 0, false, 0); // 32..48: read by both
        hints.touch(r.start() + 32 * ps, 16 * ps, 1, false, 0);
    }
    let mut m = Migrator::new(r, Params::default()).map_err(e)?;
    let plan = m.plan(hints.table(), 1_000_000_000, false);
    let migrations = plan
        .iter()
        .filter(|(_, a)| matches!(a, Action::Migrate { to: 1 }))
        .count();
    let replications = plan
        .iter()
        .filter(|(_, a)| matches!(a, Action::Replicate { on: 1 }))
        .count();
    if migrations != 16 || replications != 16 || plan.len() != 32 {
        return Err(format!(
            "plan: {migrations} migrations, {replications} replications, {plan:?}"
        ));
    }
    let done = m
        .apply(&plan, hints.table_mut(), 1_000_000_000)
        .map_err(e)?;
    if done.migrated != 16 || done.failed != 0 || done.not_executed != 16 {
        return Err(format!("applied {done:?}"));
    }
    let st = v.page_nodes().map_err(e)?;
    all_on("hot on node 1", &st[..16], 1)?;
    all_on("local to node 0", &st[16..], 0)?;
    if !v.iter().enumerate().all(|(i, x)| *x == pattern(i)) {
        return Err("data changed".into());
    }
    Ok(
        "hints -> plan (16 migrate, 16 replicate) -> 16 pages moved to node 1 with move_pages"
            .into(),
    )
}

/// Invariant 5 on a real two-node kernel: arbitrary (range, node, flags) never crash or
/// corrupt memory; each call succeeds or returns an error.
fn wrapper_fuzz() -> Result<String, String> {
    let ps = page_size();
    let canary = NodeVec::from_fn(8 * words_per_page(), Placement::Node(0), pattern).map_err(e)?;
    let target = NodeVec::from_fn(16 * words_per_page(), Placement::Node(1), pattern).map_err(e)?;
    let base = target.as_ptr() as usize;
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut ok, mut err) = (0u32, 0u32);
    for _ in 0..3000 {
        let start = match next() % 4 {
            0 => base + (next() as usize % 20) * ps,
            1 => base + (next() as usize % (20 * ps)),
            2 => next() as usize,
            _ => (next() as usize % (1 << 47)) & !(ps - 1),
        };
        let len = match next() % 3 {
            0 => (next() as usize % 20) * ps,
            1 => next() as usize % (20 * ps),
            _ => next() as usize,
        };
        let node = (next() % 4) as u32;
        let flags = MbindFlags::from_bits((next() % 8) as u32).unwrap_or(MbindFlags::NONE);
        let r = PageRange::new(start, len).and_then(|r| match next() % 5 {
            0 => mbind(r, MemPolicy::Bind(NodeSet::single(node)), flags),
            1 => mbind(
                r,
                MemPolicy::Interleave([0, node].into_iter().collect()),
                flags,
            ),
            2 => partita_numa::migrate_batched(
                r.clone_limited(),
                node,
                1 + next() as usize % 64,
                MoveScope::Exclusive,
            )
            .map(drop),
            3 => locate(r.clone_limited()).map(drop),
            _ => move_pages_to(&[start & !(ps - 1)], node, 1, MoveScope::Exclusive).map(drop),
        });
        match r {
            Ok(()) => ok += 1,
            Err(_) => err += 1,
        }
    }
    // Leave the target's policy sane again and check nothing was corrupted.
    if let Some(r) = target.pages() {
        let _ = mbind(r, MemPolicy::Default, MbindFlags::NONE);
    }
    if !canary.iter().enumerate().all(|(i, x)| *x == pattern(i))
        || !target.iter().enumerate().all(|(i, x)| *x == pattern(i))
    {
        return Err("memory changed".into());
    }
    let q = locate_pages(&[ps]).map_err(e)?;
    if q != [PageStatus::Error(libc::EFAULT)] {
        return Err(format!("query of an unmapped page gave {q:?}"));
    }
    Ok(format!(
        "3000 random calls: {ok} ok, {err} errors, memory intact"
    ))
}

trait Limited {
    fn clone_limited(&self) -> PageRange;
}
impl Limited for PageRange {
    /// Page-by-page calls over a huge random range would take forever; cap at 64 pages.
    fn clone_limited(&self) -> PageRange {
        let ps = page_size();
        PageRange::new(self.start(), self.len().min(64 * ps)).unwrap_or(*self)
    }
}

fn errors() -> Result<String, String> {
    let ps = page_size();
    let v = NodeVec::from_fn(words_per_page(), Placement::Node(0), pattern).map_err(e)?;
    let r = v.pages().ok_or("no pages")?;
    let checks: Vec<(&str, bool)> = vec![
        (
            "node 2",
            matches!(
                partita_numa::migrate(r, 2),
                Err(NumaError::NoSuchNode { node: 2, .. })
            ),
        ),
        (
            "unaligned",
            matches!(
                PageRange::new(r.start() + 8, ps),
                Err(NumaError::Unaligned { .. })
            ),
        ),
        (
            "empty",
            matches!(
                PageRange::new(r.start(), 0),
                Err(NumaError::EmptyRange { .. })
            ),
        ),
        (
            "bind to {1,2}",
            matches!(
                mbind(
                    r,
                    MemPolicy::Bind([1, 2].into_iter().collect()),
                    MbindFlags::NONE
                ),
                Err(NumaError::NoSuchNode {
                    node: 2,
                    call: "mbind",
                    ..
                })
            ),
        ),
    ];
    let bad: Vec<&str> = checks.iter().filter(|c| !c.1).map(|c| c.0).collect();
    if bad.is_empty() {
        Ok("typed errors for node 2, unaligned, empty, bind to {1,2}".into())
    } else {
        Err(format!("wrong error for {bad:?}"))
    }
}

/// The raw system call, for the wrapper-overhead comparison.
fn raw_move(pages: &[*mut libc::c_void], nodes: &[libc::c_int], status: &mut [libc::c_int]) -> i64 {
    // SAFETY: the three arrays are live and of equal length; the kernel writes only `status`.
    unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            2, // MPOL_MF_MOVE
        )
    }
}

/// The median (partita-stats', the one every table uses) of owned samples.
fn bench() -> Result<String, String> {
    const N: usize = 512;
    const REPS: usize = 4;
    let v =
        NodeVec::from_fn(N * words_per_page(), Placement::FirstTouchOn(0), pattern).map_err(e)?;
    let addrs: Vec<usize> = v.pages().ok_or("no pages")?.page_addresses().collect();
    let ptrs: Vec<*mut libc::c_void> = addrs.iter().map(|a| *a as *mut libc::c_void).collect();
    let mut status = vec![0; N];
    let mut node = 0u32;
    let mut summary = Vec::new();
    for batch in [1usize, 2, 4, 8, 16, 32, 64, 128, 256, 512] {
        let (mut raw, mut wrap) = (Vec::new(), Vec::new());
        for _ in 0..REPS {
            // Each side moves the pages once in each direction per repetition, and the order
            // alternates (raw, wrapper, wrapper, raw), so neither gets the cheaper direction
            // or the warmer machine state.
            let (mut r_ns, mut w_ns) = (0.0, 0.0);
            for use_raw in [true, false, false, true] {
                node ^= 1;
                let t = Instant::now();
                if use_raw {
                    let nodes = vec![node as libc::c_int; batch];
                    for (chunk, st) in ptrs.chunks(batch).zip(status.chunks_mut(batch)) {
                        if raw_move(chunk, &nodes[..chunk.len()], st) < 0 {
                            return Err(format!(
                                "raw move_pages failed: {}",
                                std::io::Error::last_os_error()
                            ));
                        }
                    }
                    r_ns += t.elapsed().as_nanos() as f64;
                    if status.iter().any(|s| *s != node as i32) {
                        return Err(format!("raw move to {node} left pages elsewhere"));
                    }
                } else {
                    let st = move_pages_to(&addrs, node, batch, MoveScope::Exclusive).map_err(e)?;
                    w_ns += t.elapsed().as_nanos() as f64;
                    if count_on(&st, node) != N {
                        return Err(format!("wrapper move to {node} left pages elsewhere"));
                    }
                }
            }
            raw.push(r_ns / (2 * N) as f64);
            wrap.push(w_ns / (2 * N) as f64);
        }
        let (r, w) = (median(&raw), median(&wrap));
        println!(
            "PARTITA-NUMA BENCH batch={batch} pages={N} raw_ns_per_page={r:.0} wrapper_ns_per_page={w:.0}"
        );
        summary.push(format!("{batch}:{:.0}us", w / 1000.0));
    }
    Ok(format!(
        "move_pages per page by batch {}",
        summary.join(" ")
    ))
}

/// The trigger rule of thumb on this machine: move cost / remote-miss penalty.
fn calibration() -> Result<String, String> {
    use partita_numa::calibrate::{move_cost_ns, remote_penalty_ns};
    use partita_numa::policy::Params;
    let mv = move_cost_ns(256, 256).map_err(e)?.ok_or("no second node")?;
    let pen = remote_penalty_ns(8 << 20)
        .map_err(e)?
        .ok_or("no second node")?;
    println!("PARTITA-NUMA INFO move_cost_ns_per_page {mv:.0}");
    println!("PARTITA-NUMA INFO remote_penalty_ns {pen:.1}");
    if pen > 1.0 {
        let t = Params::derived_trigger(mv as u64, pen as u64);
        println!("PARTITA-NUMA INFO derived_trigger {t}");
    } else {
        // TCG emulates memory uniformly: there is no remote penalty to divide by.
        println!("PARTITA-NUMA INFO derived_trigger none (no measurable remote penalty)");
    }
    if mv.is_nan() || mv <= 0.0 {
        return Err(format!("move cost {mv}"));
    }
    Ok(format!("move {mv:.0} ns/page, remote penalty {pen:.1} ns"))
}

fn main() {
    println!("PARTITA-NUMA INFO page_size {}", page_size());
    println!("PARTITA-NUMA INFO numa_balancing {:?}", numa_balancing());
    let p = probe();
    println!(
        "PARTITA-NUMA INFO counter_source {} ({})",
        p.best(false),
        p.why_not_perf
    );
    let mut c = Checks { run: 0, failed: 0 };
    c.check("topology", topology());
    c.check("move_round_trip", move_round_trip());
    c.check("partial_move", partial_move());
    c.check("mbind_move", mbind_move());
    c.check("interleave", interleave());
    c.check("set_mempolicy", mempolicy_thread());
    c.check("first_touch", first_touch());
    c.check("migrate_pages", whole_process());
    c.check("replicated", replicated());
    c.check("fault_sampling", fault_sampling());
    c.check("policy_driver", policy_driver());
    c.check("typed_errors", errors());
    c.check("wrapper_fuzz", wrapper_fuzz());
    c.check("move_pages_bench", bench());
    c.check("calibration", calibration());
    println!("PARTITA-NUMA DONE checks={} failed={}", c.run, c.failed);
}

//! The simulator reproduces the qualitative results numa.md lists (on the small traces, so
//! the debug-build test stays fast; the example prints the full 8-node run).

use partita_numa::sim::{PolicyKind, Report, SimConfig, TraceConfig, run_table, trigger_sweep};

fn get<'a>(rows: &'a [(&str, PolicyKind, Report)], name: &str, kind: PolicyKind) -> &'a Report {
    &rows.iter().find(|r| r.0 == name && r.1 == kind).unwrap().2
}

#[test]
fn mig_rep_beats_migration_only_and_replication_only() {
    let rows = run_table(&TraceConfig::small(), &SimConfig::default());
    let total = |k| -> u64 {
        ["sequential", "raytrace", "ocean", "database"]
            .iter()
            .map(|n| get(&rows, n, k).total_ns())
            .sum()
    };
    let (mr, m, r, s) = (
        total(PolicyKind::MigRep),
        total(PolicyKind::MigrateOnly),
        total(PolicyKind::ReplicateOnly),
        total(PolicyKind::Static),
    );
    assert!(
        mr < m && mr < r && mr < s,
        "Mig/Rep {mr}, migrate {m}, replicate {r}, static {s}"
    );
    // Per workload where the policy can help, Mig/Rep is at least as good as either alone.
    for name in ["sequential", "raytrace", "ocean"] {
        let mr = get(&rows, name, PolicyKind::MigRep);
        for k in [
            PolicyKind::MigrateOnly,
            PolicyKind::ReplicateOnly,
            PolicyKind::Static,
        ] {
            let other = get(&rows, name, k);
            assert!(
                mr.total_ns() <= other.total_ns(),
                "{name}: Mig/Rep {mr:?} vs {k:?} {other:?}"
            );
        }
    }
    // The read-shared scene is replicated, the moved process's data is migrated.
    assert!(get(&rows, "raytrace", PolicyKind::MigRep).replications > 0);
    assert!(get(&rows, "sequential", PolicyKind::MigRep).migrations > 0);
    assert!(get(&rows, "ocean", PolicyKind::MigRep).locality_percent() > 80.0);
}

#[test]
fn read_write_shared_trace_gets_almost_no_action() {
    let rows = run_table(&TraceConfig::small(), &SimConfig::default());
    let db = get(&rows, "database", PolicyKind::MigRep);
    assert!(
        db.decisions() > 100,
        "the trace must be hot enough to reach the trigger"
    );
    assert!(
        db.moves() * 100 <= db.decisions(),
        "moves {} of {} decisions",
        db.moves(),
        db.decisions()
    );
    assert_eq!(
        db.no_action.get("SharedWritten").copied(),
        Some(db.decisions())
    );
}

#[test]
fn lower_triggers_give_more_locality_and_more_overhead() {
    let rows = trigger_sweep(
        &TraceConfig::small(),
        &SimConfig::default(),
        &[32, 64, 128, 256],
    );
    let sum = |t: u32| {
        let sel: Vec<&Report> = rows.iter().filter(|r| r.0 == t).map(|r| &r.2).collect();
        let local: u64 = sel.iter().map(|r| r.local_misses).sum();
        let misses: u64 = sel.iter().map(|r| r.misses).sum();
        let ovhd: u64 = sel.iter().map(|r| r.overhead_ns).sum();
        (local as f64 / misses as f64, ovhd)
    };
    let pts: Vec<(f64, u64)> = [32, 64, 128, 256].iter().map(|t| sum(*t)).collect();
    for w in pts.windows(2) {
        assert!(
            w[0].0 > w[1].0,
            "locality must fall as the trigger rises: {pts:?}"
        );
        assert!(
            w[0].1 > w[1].1,
            "overhead must fall as the trigger rises: {pts:?}"
        );
    }
}

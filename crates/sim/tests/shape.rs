//! The model's shape, as the paper describes it (not its exact numbers).

use partita_sim::cosched::{fig1, turnaround, Coupling, RunConfig, Scheduler};
use partita_sim::model::CAPACITY;
use partita_sim::workload::{WorkloadSet, APPS};

#[test]
fn fig1_slowdowns_grow_with_bandwidth_and_nbbma_is_harmless() {
    let rows: Vec<_> = APPS.iter().map(fig1).collect();
    for w in rows.windows(2) {
        assert!(w[1].slowdown_bbma >= w[0].slowdown_bbma - 1e-9, "{w:?}");
        assert!(w[1].slowdown_pair >= w[0].slowdown_pair - 1e-9, "{w:?}");
    }
    for (r, app) in rows.iter().zip(&APPS) {
        // The solo rate is the paper's measurement, reproduced (Fig. 1A black bars).
        assert!((r.rates[0] - app.rate).abs() < 1e-6, "{r:?}");
        assert!(r.slowdown_nbbma < 1.01, "{r:?}");
        assert!(r.slowdown_bbma >= r.slowdown_pair, "{r:?}");
        // §3: beside two BBMA the workload runs very close to saturation (28.34 tx/µs).
        assert!(
            r.rates[2] > 0.9 * CAPACITY && r.rates[2] <= CAPACITY,
            "{r:?}"
        );
    }
    // §3: moderate applications slow down by 2–55 % beside two BBMA.
    for r in rows.iter().filter(|r| r.rates[0] < 12.5) {
        assert!(r.slowdown_bbma < 1.55, "{r:?}");
    }
    let top = rows.last().unwrap();
    assert!(
        top.slowdown_pair > 1.3 && top.slowdown_bbma > 1.6,
        "{top:?}"
    );
}

#[test]
fn bandwidth_policy_beats_time_sharing_beside_cache_resident_jobs() {
    for coupling in [Coupling::Barrier, Coupling::Yield] {
        let c = RunConfig {
            work_s: 4.0,
            coupling,
            ..Default::default()
        };
        for app in [&APPS[0], &APPS[10]] {
            let ts = turnaround(app, WorkloadSet::B, Scheduler::TimeSharing, &c);
            for s in [Scheduler::LatestQuantum, Scheduler::QuantaWindow] {
                let t = turnaround(app, WorkloadSet::B, s, &c);
                assert!(t < ts, "{} {s:?} {coupling:?}: {t} vs {ts}", app.name);
            }
        }
    }
}

/// Linux time-sharing is fair: with yielding threads, an application that barely uses the
/// bus, one of eight threads on four CPUs, takes twice its solo time.
#[test]
fn time_sharing_gives_each_thread_its_share() {
    let c = RunConfig {
        work_s: 10.0,
        coupling: Coupling::Yield,
        ..Default::default()
    };
    let t = turnaround(&APPS[0], WorkloadSet::B, Scheduler::TimeSharing, &c);
    assert!((t / 20.0 - 1.0).abs() < 0.03, "{t}");
    // Spinning at barriers, it progresses only while both threads happen to run.
    let b = turnaround(
        &APPS[0],
        WorkloadSet::B,
        Scheduler::TimeSharing,
        &RunConfig {
            coupling: Coupling::Barrier,
            ..c
        },
    );
    assert!(b > 1.5 * t, "{b} vs {t}");
}

#[test]
fn runs_are_deterministic_per_seed() {
    let c = RunConfig {
        work_s: 2.0,
        seed: 7,
        ..Default::default()
    };
    let a = turnaround(&APPS[9], WorkloadSet::C, Scheduler::TimeSharing, &c);
    let b = turnaround(&APPS[9], WorkloadSet::C, Scheduler::TimeSharing, &c);
    assert_eq!(a, b);
}

#[test]
fn bad_arguments_are_errors() {
    let args = partita_sim::SimulateArgs {
        seeds: 0,
        ..Default::default()
    };
    assert!(partita_sim::run(&args)
        .unwrap_err()
        .to_string()
        .contains("seeds"));
}

#[test]
fn numa_model_runs_through_simulate() {
    let args = partita_sim::SimulateArgs {
        model: partita_sim::Model::Numa,
        ..Default::default()
    };
    let r = partita_sim::run(&args).unwrap();
    assert!(
        r.text.contains("Mig/Rep") || r.text.contains("mig"),
        "{}",
        r.text
    );
}

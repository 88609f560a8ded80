//! Rounds coalesce (counts, not times); a claimed round excludes the thread.

use super::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

/// A storm of requests while a reallocation is in flight makes exactly one more reallocation.
#[test]
fn a_storm_of_requests_coalesces_into_one_more_round() {
    let rounds = Arc::new(Rounds::default());
    let ran = Arc::new(AtomicU64::new(0));
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let worker = {
        let ran = ran.clone();
        spawn(rounds.clone(), move || {
            ran.fetch_add(1, Ordering::SeqCst);
            started_tx.send(()).unwrap();
            // Block the round until the test releases it: the storm happens meanwhile.
            release_rx.recv().unwrap();
        })
        .unwrap()
    };
    rounds.request();
    started_rx.recv().unwrap(); // Round 1 is in flight.
    let mut last = 0;
    for _ in 0..10_000 {
        last = rounds.request();
    }
    release_tx.send(()).unwrap(); // Round 1 ends; round 2 covers all 10^4 requests.
    started_rx.recv().unwrap();
    release_tx.send(()).unwrap();
    rounds.wait_served(last);
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert_eq!(rounds.completed(), 2);
    // Nothing more is pending: a third round needs a new request.
    let n = rounds.request();
    started_rx.recv().unwrap();
    release_tx.send(()).unwrap();
    rounds.wait_served(n);
    assert_eq!(rounds.completed(), 3);
    rounds.stop();
    worker.join().unwrap();
}

/// A request while no round is in flight is served at once (growth and revocation stay
/// immediate), and `wait_served` returns only after a round that started after the
/// request.
#[test]
fn a_request_is_served_by_a_round_that_starts_after_it() {
    let rounds = Arc::new(Rounds::default());
    let seen = Arc::new(AtomicU64::new(0));
    let value = Arc::new(AtomicU64::new(0));
    let worker = {
        let (seen, value) = (seen.clone(), value.clone());
        spawn(rounds.clone(), move || {
            seen.store(value.load(Ordering::SeqCst), Ordering::SeqCst);
        })
        .unwrap()
    };
    for v in 1..=100 {
        value.store(v, Ordering::SeqCst);
        let n = rounds.request();
        rounds.wait_served(n);
        assert_eq!(
            seen.load(Ordering::SeqCst),
            v,
            "round did not see the change"
        );
    }
    assert!(rounds.completed() <= 100);
    rounds.stop();
    worker.join().unwrap();
}

#[test]
fn a_scheduled_round_runs_without_a_request_and_a_round_covers_it() {
    let (rounds, ran, worker) = counting_reallocator();
    rounds.schedule(std::time::Instant::now() + std::time::Duration::from_millis(5));
    // No request: the thread runs one round when the time comes (generous bound: counts only).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ran.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the scheduled round did not run"
    );
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "a timer runs one round, once"
    );
    // A time already passed is served at once; a request in between covers it.
    let n = rounds.request();
    rounds.schedule(std::time::Instant::now());
    rounds.wait_served(n);
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert!(ran.load(Ordering::SeqCst) <= 3);
    assert!(ran.load(Ordering::SeqCst) >= 2);
    rounds.stop();
    worker.join().unwrap();
}

/// Rounds and a reallocator thread whose rounds only count themselves.
fn counting_reallocator() -> (Arc<Rounds>, Arc<AtomicU64>, std::thread::JoinHandle<()>) {
    let rounds = Arc::new(Rounds::default());
    let ran = Arc::new(AtomicU64::new(0));
    let r = ran.clone();
    let worker = spawn(rounds.clone(), move || {
        r.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap(); // A test: failing to start a thread is a failure.
    (rounds, ran, worker)
}

/// A request while no round is in flight and rounds have been rare is claimed by the
/// requester (the reallocator thread does not run it); requests during the claimed round wait
/// for it and are merged into exactly one round of the thread. (When a requester may claim: the next test.)
#[test]
fn a_claimed_round_excludes_the_thread_and_later_requests_coalesce() {
    let (rounds, thread_rounds, worker) = counting_reallocator();
    let claim = rounds
        .request_or_claim()
        .expect("quiet rounds let the requester run the round");
    // While it is in flight, no other claim, and the thread does not start a round.
    let mut last = 0;
    for _ in 0..10_000 {
        assert!(rounds.request_or_claim().is_none(), "two rounds in flight");
        last = rounds.request();
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        thread_rounds.load(Ordering::SeqCst),
        0,
        "overlapping rounds"
    );
    drop(claim);
    // The thread serves the 2 × 10^4 requests in one round.
    rounds.wait_served(last);
    assert_eq!(thread_rounds.load(Ordering::SeqCst), 1);
    assert_eq!(rounds.completed(), 2);
    rounds.stop();
    worker.join().unwrap();
}

/// A claimant that cannot run its round hands it to the thread, which serves the request.
#[test]
fn a_handed_over_claim_is_served_by_the_thread() {
    let (rounds, thread_rounds, worker) = counting_reallocator();
    let claim = rounds
        .request_or_claim()
        .expect("quiet rounds let the requester run the round");
    claim.hand_over();
    rounds.wait_served(1);
    assert_eq!(thread_rounds.load(Ordering::SeqCst), 1);
    rounds.stop();
    worker.join().unwrap();
}

/// Only a request after a quiet spell following a short round may be claimed: a storm of requests
/// (rounds back to back) and a large registry's rounds stay on the reallocator thread.
#[test]
fn claims_only_after_a_quiet_spell_and_a_short_round() {
    use std::time::{Duration, Instant};
    let end = Instant::now();
    let short = CLAIM_MAX_ROUND;
    assert!(may_claim(None, end, false), "the first round");
    assert!(may_claim(Some((end, short)), end + CLAIM_QUIET, false));
    assert!(!may_claim(
        Some((end, short)),
        end + CLAIM_QUIET - Duration::from_nanos(1),
        false
    ));
    assert!(
        !may_claim(Some((end, short)), end, false),
        "right after a round"
    );
    assert!(
        may_claim(Some((end, short)), end, true),
        "a hand-over's request right after a round"
    );
    let long = CLAIM_MAX_ROUND + Duration::from_nanos(1);
    for handover in [false, true] {
        assert!(
            !may_claim(Some((end, long)), end + CLAIM_QUIET * 100, handover),
            "a long round"
        );
    }
}

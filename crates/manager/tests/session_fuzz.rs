//! Random sessions against a live manager (the per-connection state machine): each session is
//! a seeded random sequence of valid frames in any order (hello, doorbell, goodbye, status,
//! confine to unknown partitions), mutated frames, forged lengths and garbage, cut off at a
//! random point. After every session the manager must still answer a status request; at the
//! end no application may remain registered and the manager must shut down cleanly (no task
//! panicked). Stable-Rust stand-in for a coverage-guided fuzzer; sessions:
//! `PARTITA_FUZZ_SESSIONS` (default 200), seed `PARTITA_FUZZ_SEED`.

mod support;

use partita_manager::{spawn_in_process, Config};
use partita_protocol::wire::{ClientMessage, Hello};
use partita_queues::XorShift64 as Rng;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;
use support::TempDir;

fn chunk(rng: &mut Rng) -> Vec<u8> {
    let valid = |rng: &mut Rng| match rng.below(6) {
        0 => ClientMessage::Hello(Hello::new(1 + rng.below(8) as u32, "fuzz")).encode(),
        1 => ClientMessage::DemandChanged.encode(),
        2 => ClientMessage::Goodbye.encode(),
        3 => ClientMessage::StatusRequest { version: 1 }.encode(),
        4 => ClientMessage::Confine {
            version: 1,
            partition: "no-such-partition".into(),
        }
        .encode(),
        _ => ClientMessage::Hello(Hello {
            partition_hint: "nope".into(),
            ..Hello::new(2, "hinted")
        })
        .encode(),
    };
    let mut b = valid(rng);
    match rng.below(5) {
        0 | 1 => {} // valid as is
        2 => {
            let i = rng.below(b.len());
            b[i] ^= 1 << rng.below(8);
        }
        3 => {
            let len = [0u32, 4097, u32::MAX, rng.next_u64() as u32][rng.below(4)];
            b[..4].copy_from_slice(&len.to_le_bytes());
        }
        _ => b.truncate(rng.below(b.len())),
    }
    b
}

#[test]
fn random_sessions_never_break_the_manager() {
    let sessions: usize = std::env::var("PARTITA_FUZZ_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("PARTITA_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x0dd_5eed);
    let dir = TempDir::new("sessfuzz");
    let mut c = Config::from_toml_str(support::TRACKED).unwrap();
    c.cgroups = false;
    c.hello_timeout_ms = 300;
    let h = spawn_in_process(c, dir.path("m.sock")).unwrap();
    let mut rng = Rng::new(seed);
    for i in 0..sessions {
        let mut s = UnixStream::connect(h.socket()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        for _ in 0..1 + rng.below(5) {
            if s.write_all(&chunk(&mut rng)).is_err() {
                break; // the manager already closed: fine
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let r = s.read_to_end(&mut sink);
        assert!(
            !matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "session {i} (seed {seed:#x}): the manager never closed"
        );
        drop(s);
        partita_manager::query_status(h.socket())
            .unwrap_or_else(|e| panic!("session {i} (seed {seed:#x}): manager broken: {e}"));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !h.status().applications.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        h.status().applications.is_empty(),
        "ghost applications: {:?}",
        h.status().applications
    );
    h.shutdown().unwrap();
}

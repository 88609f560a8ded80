//! Mutation fuzzing of the wire decoders on stable Rust (cargo-fuzz needs nightly and a
//! toolchain this CI does not build): a seed corpus of every valid frame, mutated by bit
//! flips, byte overwrites, truncation, insertion, length-prefix forgery and splicing, with a
//! fixed-seed xorshift RNG so a run is reproducible. Not coverage-guided.
//!
//! For every input: `frame_len`, `ClientMessage::decode` and `ManagerMessage::decode` must
//! return (never panic) within 100 ms (else a "hang"), and anything that decodes must
//! re-encode to a frame that decodes to the same message.
//!
//! `cargo run -p partita-protocol --release --example fuzz_wire -- [inputs] [seed]`

use partita_protocol::wire::{
    frame_len, ClientMessage, ErrorCode, Hello, ManagerMessage, FLAG_PARTITION_ONLY,
    MAX_CLIENT_FRAME, MAX_MANAGER_FRAME,
};
use partita_protocol::CpuSet;
use partita_queues::XorShift64 as Rng;
use std::time::{Duration, Instant};

fn corpus() -> Vec<Vec<u8>> {
    let mut hello = Hello::new(8, "solver");
    hello.partition_hint = "batch".into();
    hello.flags = FLAG_PARTITION_ONLY;
    let cpus: CpuSet = [0, 3, 64, 1023].into_iter().collect();
    let client = [
        ClientMessage::Hello(hello),
        ClientMessage::DemandChanged,
        ClientMessage::StatusRequest { version: 1 },
        ClientMessage::Confine {
            version: 1,
            partition: "a.b".into(),
        },
        ClientMessage::Goodbye,
    ];
    let manager = [
        ManagerMessage::Welcome {
            version: 1,
            app_id: 7,
            partition: "default".into(),
        },
        ManagerMessage::Error {
            code: ErrorCode::Timeout,
            message: "late".into(),
        },
        ManagerMessage::StatusReply {
            json: "{\"a\":1}".into(),
        },
        ManagerMessage::Confined {
            partition: "x".into(),
            cpus,
        },
    ];
    let mut v: Vec<Vec<u8>> = client.iter().map(|m| m.encode()).collect();
    v.extend(manager.iter().map(|m| m.encode()));
    v
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = [0, 0xff, 0x7f, 0x80, 1, b'\n', 0xc3][rng.below(7)];
            }
            2 => b.truncate(rng.below(b.len() + 1)),
            3 => {
                let i = rng.below(b.len() + 1);
                b.insert(i, rng.next_u64() as u8);
            }
            4 if b.len() >= 4 => {
                // Forge the length prefix.
                let len = [0u32, 1, 3, 4096, 4097, u32::MAX, rng.next_u64() as u32][rng.below(7)];
                b[..4].copy_from_slice(&len.to_le_bytes());
            }
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(other.len() + 1);
                b.extend_from_slice(&other[cut..]);
            }
            _ => b = (0..rng.below(64)).map(|_| rng.next_u64() as u8).collect(),
        }
    }
    b
}

/// Decode as both sides would; check the round trip of whatever decodes.
fn check(input: &[u8]) {
    if input.len() >= 4 {
        let prefix: [u8; 4] = [input[0], input[1], input[2], input[3]];
        let _ = frame_len(prefix, MAX_CLIENT_FRAME);
        let _ = frame_len(prefix, MAX_MANAGER_FRAME);
    }
    let payload = input.get(4..).unwrap_or(&[]);
    for p in [input, payload] {
        if let Ok(m) = ClientMessage::decode(p) {
            let again = ClientMessage::decode(&m.encode()[4..]).expect("re-encoded client frame");
            assert_eq!(again, m, "client round trip");
        }
        if let Ok(m) = ManagerMessage::decode(p) {
            let again = ManagerMessage::decode(&m.encode()[4..]).expect("re-encoded manager frame");
            assert_eq!(again, m, "manager round trip");
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(0x5eed_1234_abcd_ef01);
    let seeds = corpus();
    let mut rng = Rng::new(seed);
    let (mut crashes, mut hangs, mut decoded) = (0u64, 0u64, 0u64);
    let mut slowest = Duration::ZERO;
    std::panic::set_hook(Box::new(|_| {}));
    let start = Instant::now();
    for i in 0..n {
        let input = mutate(&mut rng, &seeds);
        let t = Instant::now();
        let ok = std::panic::catch_unwind(|| check(&input));
        let dt = t.elapsed();
        slowest = slowest.max(dt);
        if dt > Duration::from_millis(100) {
            hangs += 1;
        }
        match ok {
            Ok(()) => {
                decoded += ClientMessage::decode(input.get(4..).unwrap_or(&[])).is_ok() as u64
                    + ManagerMessage::decode(input.get(4..).unwrap_or(&[])).is_ok() as u64;
            }
            Err(_) => {
                crashes += 1;
                if crashes <= 5 {
                    eprintln!("crash at input {i}: {:02x?}", input);
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "| inputs | seed | crashes | hangs (>100 ms) | valid frames | slowest input | inputs/s |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {n} | {seed:#x} | {crashes} | {hangs} | {decoded} | {:.1} µs | {:.0} |",
        slowest.as_secs_f64() * 1e6,
        n as f64 / secs
    );
    if crashes > 0 || hangs > 0 {
        std::process::exit(1);
    }
}

//! The seed corpora, from real encoded messages: `seeds/wire_decode/` (payloads and frames of
//! every message kind) and `seeds/session/` (client conversations, valid and not). The files
//! are committed; the test `seeds_are_committed` checks them and, with
//! `PARTITA_WRITE_SEEDS=1`, rewrites them:
//! `PARTITA_WRITE_SEEDS=1 cargo test --manifest-path fuzz/Cargo.toml`.

use partita_protocol::wire::{
    ClientMessage, ErrorCode, Hello, ManagerMessage, FLAG_JOBSERVER, FLAG_PARTITION_ONLY,
    PROTOCOL_VERSION,
};
use partita_protocol::CpuSet;

fn hello(pool: u32, name: &str, hint: &str, flags: u32) -> Vec<u8> {
    ClientMessage::Hello(Hello {
        partition_hint: hint.into(),
        flags,
        ..Hello::new(pool, name)
    })
    .encode()
}

fn status(version: u16) -> Vec<u8> {
    ClientMessage::StatusRequest { version }.encode()
}

fn confine(partition: &str) -> Vec<u8> {
    ClientMessage::Confine {
        version: PROTOCOL_VERSION,
        partition: partition.into(),
    }
    .encode()
}

fn demand() -> Vec<u8> {
    ClientMessage::DemandChanged.encode()
}

fn goodbye() -> Vec<u8> {
    ClientMessage::Goodbye.encode()
}

/// `wire_decode`'s seeds: every message kind of both directions, as a payload (what the
/// decoders take) and as a frame, and a stream of frames.
pub fn wire_decode() -> Vec<(&'static str, Vec<u8>)> {
    let cpus: CpuSet = [0, 3, 64, 1023].into_iter().collect();
    let manager = [
        (
            "welcome",
            ManagerMessage::Welcome {
                version: PROTOCOL_VERSION,
                app_id: 7,
                partition: "batch".into(),
            },
        ),
        (
            "error",
            ManagerMessage::Error {
                code: ErrorCode::OutOfOrder,
                message: "unexpected message after registration".into(),
            },
        ),
        (
            "status-reply",
            ManagerMessage::StatusReply {
                json: "{\"cpus_managed\":2,\"applications\":[]}".into(),
            },
        ),
        (
            "confined",
            ManagerMessage::Confined {
                partition: "default".into(),
                cpus,
            },
        ),
    ];
    let client = [
        ("hello", hello(8, "fib", "", 0)),
        (
            "hello-hint-flags",
            hello(2, "make", "batch", FLAG_PARTITION_ONLY | FLAG_JOBSERVER),
        ),
        ("demand", demand()),
        ("status", status(PROTOCOL_VERSION)),
        ("confine", confine("batch")),
        ("goodbye", goodbye()),
    ];
    let mut out = Vec::new();
    for (name, frame) in client {
        out.push((name, frame[4..].to_vec()));
    }
    for (name, m) in &manager {
        out.push((name, m.encode()[4..].to_vec()));
    }
    out.push(("frame-hello", hello(4, "solver", "", 0)));
    out.push(("frame-confined", manager[3].1.encode()));
    out.push((
        "stream",
        [hello(3, "x", "", 0), demand(), goodbye()].concat(),
    ));
    out
}

/// `session`'s seeds: what clients send, valid conversations first.
pub fn session() -> Vec<(&'static str, Vec<u8>)> {
    let mut oversized = hello(1, "big", "", 0);
    oversized.extend(4097u32.to_le_bytes());
    let mut cut = hello(1, "cut", "", 0);
    cut.extend(&demand()[..4]);
    cut.extend([9, 0, 0, 0, 2]);
    vec![
        (
            "register",
            [hello(4, "fib", "", 0), demand(), demand(), goodbye()].concat(),
        ),
        ("register-eof", [hello(2, "fib", "", 0), demand()].concat()),
        ("by-name", [hello(2, "solver", "", 0), goodbye()].concat()),
        (
            "hint",
            [hello(1, "a", "batch", FLAG_PARTITION_ONLY), goodbye()].concat(),
        ),
        (
            "hint-default",
            [hello(1, "a", "default", 0), goodbye()].concat(),
        ),
        (
            "jobserver",
            [hello(16, "make", "", FLAG_JOBSERVER), demand()].concat(),
        ),
        ("hint-closed", hello(1, "a", "closed", 0)),
        ("hint-unknown", hello(1, "a", "nowhere", 0)),
        ("status", status(PROTOCOL_VERSION)),
        ("status-version", status(PROTOCOL_VERSION + 1)),
        ("confine-default", confine("")),
        ("confine-batch", confine("batch")),
        ("confine-closed", confine("closed")),
        ("confine-unknown", confine("nowhere")),
        ("goodbye-first", goodbye()),
        ("demand-first", demand()),
        (
            "hello-twice",
            [hello(1, "a", "", 0), hello(1, "a", "", 0)].concat(),
        ),
        (
            "hello-status",
            [hello(1, "a", "", 0), status(PROTOCOL_VERSION)].concat(),
        ),
        ("oversized", oversized),
        ("cut", cut),
        (
            "empty-frame",
            [hello(1, "a", "", 0), vec![0, 0, 0, 0]].concat(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The committed seed files are exactly what the generators produce (rewritten with
    /// `PARTITA_WRITE_SEEDS=1`).
    #[test]
    fn seeds_are_committed() {
        let write = std::env::var_os("PARTITA_WRITE_SEEDS").is_some();
        for (target, seeds) in [
            ("wire_decode", super::wire_decode()),
            ("session", super::session()),
        ] {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("seeds")
                .join(target);
            for (name, bytes) in seeds {
                let path = dir.join(name);
                if write {
                    std::fs::create_dir_all(&dir).unwrap();
                    std::fs::write(&path, &bytes).unwrap();
                }
                let on_disk = std::fs::read(&path).unwrap_or_else(|e| {
                    panic!("{}: {e} (PARTITA_WRITE_SEEDS=1 writes it)", path.display())
                });
                assert_eq!(on_disk, bytes, "{} is stale", path.display());
            }
        }
    }

    /// Every session seed passes the session check (the model agrees with the manager on
    /// the conversations it was written from).
    #[test]
    fn session_seeds_pass() {
        for (name, bytes) in super::session() {
            eprintln!("seed {name}");
            crate::session::check(&bytes);
        }
    }

    /// Every decoder seed passes the decoder check.
    #[test]
    fn wire_seeds_pass() {
        for (_, bytes) in super::wire_decode() {
            crate::wire::check(&bytes);
        }
    }
}

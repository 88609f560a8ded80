//! The daemon's per-connection state machine driven in-process ([`Harness`]): what the
//! `session` fuzz target checks after every input, on hand-written sessions.

use partita_manager::harness::{Harness, Session};
use partita_manager::{Config, Status};
use partita_protocol::wire::{ClientMessage, ErrorCode, Hello, ManagerMessage, PROTOCOL_VERSION};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
fn harness() -> (MutexGuard<'static, ()>, Harness) {
    // One harness at a time: each confines this very process (see the module's docs), and
    // a second one would record the first one's narrowed affinity as the original.
    static ONE: Mutex<()> = Mutex::new(());
    let guard = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let c = Config::from_toml_str(
        "uncontrolled = \"tracked\"\ncgroups = false\n\
         [[partition]]\nname = \"batch\"\nshare = 1\nmembers = { hint = true }\n",
    )
    .unwrap();
    (guard, Harness::new(c).unwrap())
}

const LIMIT: Duration = Duration::from_secs(20);

fn codes(s: &Session) -> Vec<Option<ErrorCode>> {
    s.frames()
        .unwrap()
        .into_iter()
        .map(|m| match m {
            ManagerMessage::Error { code, .. } => Some(code),
            _ => None,
        })
        .collect()
}

#[test]
fn hello_then_doorbells_then_goodbye_leaves_no_application() {
    let (_one, h) = harness();
    let mut input = ClientMessage::Hello(Hello {
        partition_hint: "batch".into(),
        ..Hello::new(3, "t")
    })
    .encode();
    for _ in 0..3 {
        input.extend(ClientMessage::DemandChanged.encode());
    }
    input.extend(ClientMessage::Goodbye.encode());
    input.extend(b"ignored after goodbye");
    let s = h.session(&input, LIMIT).unwrap();
    let frames = s.frames().unwrap();
    assert!(
        matches!(&frames[..], [ManagerMessage::Welcome { partition, .. }] if partition == "batch"),
        "{frames:?}"
    );
    assert!(h.status().applications.is_empty());
    assert_eq!(h.open_connections(), 0);
}

#[test]
fn refusals_are_one_error_reply_then_a_close_and_are_counted() {
    let (_one, h) = harness();
    let status = ClientMessage::StatusRequest {
        version: PROTOCOL_VERSION,
    };
    let cases: Vec<(Vec<u8>, Vec<Option<ErrorCode>>)> = vec![
        (vec![0, 0, 0, 0], vec![Some(ErrorCode::Malformed)]),
        (vec![0, 0, 1, 0], vec![Some(ErrorCode::Oversized)]),
        (
            ClientMessage::Goodbye.encode(),
            vec![Some(ErrorCode::OutOfOrder)],
        ),
        (vec![3, 0, 0, 0, 3, 9, 0], vec![Some(ErrorCode::Version)]),
        (
            [
                ClientMessage::Hello(Hello::new(1, "t")).encode(),
                status.encode(),
            ]
            .concat(),
            vec![None, Some(ErrorCode::OutOfOrder)],
        ),
        (
            ClientMessage::Hello(Hello {
                partition_hint: "nowhere".into(),
                ..Hello::new(1, "t")
            })
            .encode(),
            vec![Some(ErrorCode::UnknownPartition)],
        ),
    ];
    for (i, (input, want)) in cases.into_iter().enumerate() {
        let s = h.session(&input, LIMIT).unwrap();
        assert_eq!(codes(&s), want, "case {i}");
        let refused: u64 = h.status().refusals.values().sum();
        assert_eq!(refused, i as u64 + 1, "case {i}: refusal not counted");
        assert!(h.status().applications.is_empty(), "case {i}");
    }
    // Silence then EOF, a cut length prefix: no reply, no refusal.
    for input in [&[][..], &[7, 0][..]] {
        let s = h.session(input, LIMIT).unwrap();
        assert!(s.reply.is_empty());
    }
    assert_eq!(h.status().refusals.values().sum::<u64>(), 6);
    assert_eq!(h.open_connections(), 0);
}

#[test]
fn status_and_confine_get_their_replies() {
    let (_one, h) = harness();
    let input = ClientMessage::StatusRequest {
        version: PROTOCOL_VERSION,
    }
    .encode();
    let s = h.session(&input, LIMIT).unwrap();
    let frames = s.frames().unwrap();
    let [ManagerMessage::StatusReply { json }] = &frames[..] else {
        panic!("{frames:?}")
    };
    let _: Status = serde_json::from_str(json).unwrap();
    let input = ClientMessage::Confine {
        version: PROTOCOL_VERSION,
        partition: "batch".into(),
    }
    .encode();
    let s = h.session(&input, LIMIT).unwrap();
    let frames = s.frames().unwrap();
    assert!(
        matches!(&frames[..], [ManagerMessage::Confined { partition, cpus }] if partition == "batch" && !cpus.is_empty()),
        "{frames:?}"
    );
}

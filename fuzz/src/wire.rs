//! The `wire_decode` property: no decoder panics on any bytes, a decoded message is a fixed
//! point of encode-then-decode, and the encoders write what the decoders accept for any text
//! (the input read as the strings of every message kind).

use partita_protocol::wire::{
    frame_len, ClientMessage, DecodeError, ErrorCode, Hello, ManagerMessage, KNOWN_FLAGS,
    MAX_CLIENT_FRAME, MAX_MANAGER_FRAME, MAX_MESSAGE, MAX_NAME, PROTOCOL_VERSION,
};
use partita_protocol::CpuSet;

/// Check every decoder on `data`: as one client payload, as one manager payload, as a length
/// prefix (both limits), as a stream of frames in each direction, and as error codes.
pub fn check(data: &[u8]) {
    if let Ok(m) = ClientMessage::decode(data) {
        let frame = client_round_trip(&m);
        // The client encoding is canonical: one message, one byte string.
        assert_eq!(&frame[4..], data, "{m:?} re-encodes to other bytes");
    }
    if let Ok(m) = ManagerMessage::decode(data) {
        let frame = manager_round_trip(&m);
        // Canonical too, except error codes this version does not know (read as `Unknown`).
        if !matches!(
            m,
            ManagerMessage::Error {
                code: ErrorCode::Unknown,
                ..
            }
        ) {
            assert_eq!(&frame[4..], data, "{m:?} re-encodes to other bytes");
        }
    }
    if let Some(prefix) = data.first_chunk::<4>() {
        for max in [MAX_CLIENT_FRAME, MAX_MANAGER_FRAME] {
            check_frame_len(*prefix, max);
        }
    }
    stream(data, MAX_CLIENT_FRAME, |p| {
        ClientMessage::decode(p).map(|m| drop(client_round_trip(&m)))
    });
    stream(data, MAX_MANAGER_FRAME, |p| {
        ManagerMessage::decode(p).map(|m| drop(manager_round_trip(&m)))
    });
    encoders(data);
    for pair in data.chunks_exact(2) {
        let v = u16::from_le_bytes([pair[0], pair[1]]);
        let code = ErrorCode::from_u16(v);
        assert!(
            code as u16 == v || code == ErrorCode::Unknown,
            "{v} -> {code:?}"
        );
        assert_eq!(ErrorCode::from_u16(code as u16), code);
    }
}

/// Encode, check the length prefix, decode again: the same message. Returns the frame.
fn client_round_trip(m: &ClientMessage) -> Vec<u8> {
    let frame = m.encode();
    let len = frame_len(prefix(&frame), MAX_CLIENT_FRAME).expect("own frame's length");
    assert_eq!(len, frame.len() - 4);
    assert_eq!(ClientMessage::decode(&frame[4..]).as_ref(), Ok(m));
    frame
}

/// As [`client_round_trip`], for the manager's messages.
fn manager_round_trip(m: &ManagerMessage) -> Vec<u8> {
    let frame = m.encode();
    let len = frame_len(prefix(&frame), MAX_MANAGER_FRAME).expect("own frame's length");
    assert_eq!(len, frame.len() - 4);
    assert_eq!(ManagerMessage::decode(&frame[4..]).as_ref(), Ok(m));
    frame
}

fn prefix(frame: &[u8]) -> [u8; 4] {
    *frame.first_chunk().expect("a frame has a length prefix")
}

/// `frame_len` accepts exactly the lengths 1..=max, and says why it refuses the others.
fn check_frame_len(p: [u8; 4], max: usize) {
    let len = u32::from_le_bytes(p) as usize;
    match frame_len(p, max) {
        Ok(n) => assert!(n == len && (1..=max).contains(&n)),
        Err(DecodeError::Empty) => assert_eq!(len, 0),
        Err(DecodeError::Oversized { len: l, max: m }) => assert!(l == len && m == max && l > m),
        Err(e) => panic!("frame_len({p:?}, {max}): unexpected {e:?}"),
    }
}

/// Read `data` as a stream of frames, as a reader does: a prefix, then the payload, decoded
/// by `decode`, until the bytes run out or a frame is refused. Every error has a code and a
/// message.
fn stream(mut data: &[u8], max: usize, decode: impl Fn(&[u8]) -> Result<(), DecodeError>) {
    while let Some(p) = data.first_chunk::<4>() {
        let len = match frame_len(*p, max) {
            Ok(n) => n,
            Err(e) => return describe(&e),
        };
        let Some(payload) = data.get(4..4 + len) else {
            return;
        };
        if let Err(e) = decode(payload) {
            return describe(&e);
        }
        data = &data[4 + len..];
    }
}

fn describe(e: &DecodeError) {
    let _ = e.code();
    assert!(!e.to_string().is_empty());
}

/// The input as text (lossy UTF-8) in every string field and as numbers in the others:
/// each message encodes to a frame that decodes to it, with its strings as the protocol says
/// the encoder leaves them ([`cleaned`]).
fn encoders(data: &[u8]) {
    let text = String::from_utf8_lossy(data).into_owned();
    let word = |i: usize| {
        let b = |k: usize| data.get(i + k).copied().unwrap_or(0);
        u32::from_le_bytes([b(0), b(1), b(2), b(3)])
    };
    let (name, message) = (cleaned(&text, MAX_NAME), cleaned(&text, MAX_MESSAGE));
    let hello = Hello {
        version: PROTOCOL_VERSION,
        pool_size: 1 + word(0) % 65536,
        flags: word(4) & KNOWN_FLAGS,
        name: text.clone(),
        partition_hint: text.clone(),
    };
    let got = ClientMessage::decode(&ClientMessage::Hello(hello.clone()).encode()[4..]);
    if name.is_empty() {
        assert!(
            matches!(got, Err(DecodeError::InvalidField { field: "name", .. })),
            "{got:?}"
        );
    } else {
        let want = Hello {
            name: name.clone(),
            partition_hint: name.clone(),
            ..hello
        };
        assert_eq!(got, Ok(ClientMessage::Hello(want)));
    }
    let confine = |partition| ClientMessage::Confine {
        version: PROTOCOL_VERSION,
        partition,
    };
    let got = ClientMessage::decode(&confine(text.clone()).encode()[4..]);
    assert_eq!(got, Ok(confine(name.clone())));
    let cpus: CpuSet = data.iter().map(|&b| b as usize * 4).collect();
    let code = ErrorCode::from_u16(word(8) as u16);
    let pairs = [
        (
            ManagerMessage::Welcome {
                version: PROTOCOL_VERSION,
                app_id: word(0),
                partition: text.clone(),
            },
            ManagerMessage::Welcome {
                version: PROTOCOL_VERSION,
                app_id: word(0),
                partition: name.clone(),
            },
        ),
        (
            ManagerMessage::Error {
                code,
                message: text.clone(),
            },
            ManagerMessage::Error { code, message },
        ),
        (
            ManagerMessage::Confined {
                partition: text.clone(),
                cpus,
            },
            ManagerMessage::Confined {
                partition: name,
                cpus,
            },
        ),
        (
            ManagerMessage::StatusReply { json: text.clone() },
            ManagerMessage::StatusReply { json: text },
        ),
    ];
    for (m, want) in pairs {
        let frame = m.encode();
        assert_eq!(
            frame_len(prefix(&frame), MAX_MANAGER_FRAME),
            Ok(frame.len() - 4)
        );
        assert_eq!(ManagerMessage::decode(&frame[4..]), Ok(want));
    }
}

/// A string as the encoder must leave it, written out independently of it: control
/// characters become U+FFFD, then it is cut to at most `max` bytes on a character boundary.
fn cleaned(s: &str, max: usize) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = if c.is_control() {
            char::REPLACEMENT_CHARACTER
        } else {
            c
        };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

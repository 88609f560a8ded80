//! Bad input against a real manager (in-process daemon, raw socket clients): every case gets
//! a typed error reply and a disconnect, and the manager keeps serving. The cases that need
//! separate processes (the application limit, `partita serve` configuration errors) are the
//! root package's `tests/manager_limits.rs`.

mod support;

use partita_manager::{spawn_in_process, Config};
use partita_protocol::wire::{ClientMessage, ErrorCode, Hello, ManagerMessage};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use support::TempDir;

fn config() -> Config {
    let mut c = Config::from_toml_str(support::TRACKED).unwrap();
    c.hello_timeout_ms = 300;
    c.max_applications = 2;
    c
}

/// Read everything until EOF (with a deadline) and decode the first frame.
fn reply(s: &mut UnixStream) -> (Option<ManagerMessage>, bool) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let eof = s.read_to_end(&mut buf).is_ok();
    if buf.len() < 4 {
        return (None, eof);
    }
    let len = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
    (ManagerMessage::decode(&buf[4..4 + len]).ok(), eof)
}

fn expect_error(s: &mut UnixStream, code: ErrorCode) -> String {
    match reply(s) {
        (Some(ManagerMessage::Error { code: c, message }), true) => {
            assert_eq!(c, code, "{message}");
            message
        }
        other => panic!("expected {code:?} and EOF, got {other:?}"),
    }
}

#[test]
fn bad_messages_get_a_typed_error_and_a_disconnect() {
    let dir = TempDir::new("proto");
    let h = spawn_in_process(config(), dir.path("m.sock")).unwrap();
    let connect = || UnixStream::connect(h.socket()).unwrap();

    // Unknown kind.
    let mut s = connect();
    s.write_all(&[1, 0, 0, 0, 0x7f]).unwrap();
    expect_error(&mut s, ErrorCode::Malformed);

    // Oversized length prefix: refused before reading the body.
    let mut s = connect();
    s.write_all(&(1u32 << 30).to_le_bytes()).unwrap();
    expect_error(&mut s, ErrorCode::Oversized);

    // Truncated: announces 100 bytes, sends 10, closes its side.
    let mut s = connect();
    s.write_all(&100u32.to_le_bytes()).unwrap();
    s.write_all(&[1; 10]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    expect_error(&mut s, ErrorCode::Malformed);

    // Malformed field (empty name) inside a well-framed hello.
    let mut s = connect();
    let mut hello = Hello::new(2, "x");
    hello.name.clear();
    s.write_all(&ClientMessage::Hello(hello).encode()).unwrap();
    let msg = expect_error(&mut s, ErrorCode::Malformed);
    assert!(msg.contains("name"), "{msg}");

    // Wrong version.
    let mut s = connect();
    let mut hello = Hello::new(2, "x");
    hello.version = 99;
    s.write_all(&ClientMessage::Hello(hello).encode()).unwrap();
    expect_error(&mut s, ErrorCode::Version);

    // Out of order: a doorbell before any hello.
    let mut s = connect();
    s.write_all(&ClientMessage::DemandChanged.encode()).unwrap();
    expect_error(&mut s, ErrorCode::OutOfOrder);

    // A hint naming no partition.
    let mut s = connect();
    let mut hello = Hello::new(2, "x");
    hello.partition_hint = "nowhere".into();
    s.write_all(&ClientMessage::Hello(hello).encode()).unwrap();
    expect_error(&mut s, ErrorCode::UnknownPartition);

    // Garbage of every length never takes the manager down.
    for n in 0..64u8 {
        let mut s = connect();
        let junk: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect();
        let _ = s.write_all(&junk);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = reply(&mut s);
    }
    assert!(h.status().applications.is_empty());
    assert!(
        partita_manager::query_status(h.socket()).is_ok(),
        "manager stopped serving"
    );
    h.shutdown().unwrap();
}

/// `frame` with its only `_` byte replaced by `byte` (the encoder never writes a control
/// character: a client that does patches the bytes, as here).
fn patched(mut frame: Vec<u8>, byte: u8) -> Vec<u8> {
    let at = frame.iter().position(|&b| b == b'_').unwrap();
    frame[at] = byte;
    frame
}

/// A name from a client (hello name, partition hint, confine partition) carrying a control
/// character is a protocol error: a Malformed reply naming the field, a disconnect, a counted
/// refusal, and nothing registered or confined; the manager keeps serving.
#[test]
fn control_characters_in_client_names_are_refused_and_disconnected() {
    let dir = TempDir::new("ctrl");
    let h = spawn_in_process(config(), dir.path("m.sock")).unwrap();
    let before = sys_affinity();
    let frames = [
        ("name", ClientMessage::Hello(Hello::new(2, "a_b")).encode()),
        ("partition_hint", {
            let mut hello = Hello::new(2, "ab");
            hello.partition_hint = "p_q".into();
            ClientMessage::Hello(hello).encode()
        }),
        (
            "partition",
            ClientMessage::Confine {
                version: partita_protocol::wire::PROTOCOL_VERSION,
                partition: "x_y".into(),
            }
            .encode(),
        ),
    ];
    let mut n = 0;
    for (field, frame) in frames {
        for byte in [b'\t', b'\n', 0x1b, 0x7f] {
            let mut s = UnixStream::connect(h.socket()).unwrap();
            s.write_all(&patched(frame.clone(), byte)).unwrap();
            let msg = expect_error(&mut s, ErrorCode::Malformed);
            assert!(
                msg.contains(field) && msg.contains("control"),
                "{field} {byte:#x}: {msg}"
            );
            n += 1;
        }
    }
    let st = h.status();
    assert!(st.applications.is_empty(), "{st:?}");
    assert_eq!(st.refusals.get("Malformed"), Some(&n), "{:?}", st.refusals);
    assert_eq!(
        sys_affinity(),
        before,
        "a refused confine request confined this process"
    );
    assert!(
        partita_manager::query_status(h.socket()).is_ok(),
        "manager stopped serving"
    );
    h.shutdown().unwrap();
}

fn sys_affinity() -> partita_protocol::CpuSet {
    partita_manager::sys::get_affinity(0).unwrap()
}

#[test]
fn a_silent_client_is_dropped_after_the_timeout() {
    let dir = TempDir::new("silent");
    let h = spawn_in_process(config(), dir.path("m.sock")).unwrap();
    let mut s = UnixStream::connect(h.socket()).unwrap();
    let t = Instant::now();
    expect_error(&mut s, ErrorCode::Timeout);
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "dropped too early: {:?}",
        t.elapsed()
    );
    h.shutdown().unwrap();
}

/// Registers over a raw socket (this test process is the application).
fn raw_register(socket: &std::path::Path, name: &str) -> Result<UnixStream, (ErrorCode, String)> {
    let mut s = UnixStream::connect(socket).unwrap();
    s.write_all(&ClientMessage::Hello(Hello::new(2, name)).encode())
        .unwrap();
    let mut buf = [0u8; 512];
    let (n, _fd) =
        partita_protocol::sys::recv_with_fd(std::os::fd::AsFd::as_fd(&s), &mut buf).unwrap();
    let len = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
    assert!(n >= 4 + len);
    match ManagerMessage::decode(&buf[4..4 + len]).unwrap() {
        ManagerMessage::Welcome { .. } => Ok(s),
        ManagerMessage::Error { code, message } => Err((code, message)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn identity_comes_from_the_kernel() {
    let dir = TempDir::new("ident");
    let h = spawn_in_process(config(), dir.path("m.sock")).unwrap();
    let first = raw_register(h.socket(), "one").expect("first registration");
    let st = h.status();
    assert_eq!(st.applications.len(), 1);
    // SO_PEERCRED: the pid is this process's, whatever the message said.
    assert_eq!(st.applications[0].pid, std::process::id() as i32);
    // The same process cannot register twice.
    let (code, _) = raw_register(h.socket(), "again").unwrap_err();
    assert_eq!(code, ErrorCode::OutOfOrder);
    drop(first);
    let t = Instant::now();
    while !h.status().applications.is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the closed registration was never dropped"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    h.shutdown().unwrap();
}

/// A manager that goes away mid-request (accepts, reads, closes without a reply): the client
/// side (`partita status`, `partita run`) gets an error that says so, not a bare
/// "failed to fill whole buffer".
#[test]
fn a_manager_closing_before_its_reply_is_reported_as_such() {
    let dir = TempDir::new("closed-early");
    let socket = dir.path("p.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut prefix = [0u8; 4];
        s.read_exact(&mut prefix).unwrap();
        // Dropped here: closed with no reply.
    });
    let err = partita_manager::query_status(&socket)
        .unwrap_err()
        .to_string();
    server.join().unwrap();
    assert!(
        err.contains("closed the connection before a whole reply"),
        "{err}"
    );
    assert!(err.contains(&socket.display().to_string()), "{err}");
}

//! The `session` property: a client sends arbitrary bytes to the manager's real connection
//! task (in-process, `partita_manager::harness`); what comes back must be exactly what a model
//! of the protocol predicts, and the manager must be left as it was.
//!
//! The model (the protocol as the module docs of `partita_protocol::wire` state it): the
//! first frame must be a hello, a status request or a confine request; a status
//! request gets the status and the connection ends; a confine request gets `Confined` or a
//! refusal; a hello gets `Welcome` (in the partition its hint or name selects) or a refusal,
//! then any number of doorbells until a goodbye or the end of the bytes. A frame that is
//! oversized, cut, malformed or out of order gets exactly one `Error` with the matching code,
//! and nothing after it. After every session: no application registered, no connection slot
//! held, refusals counted once each, application ids never reused.

use partita_manager::harness::{Harness, Session};
use partita_manager::{Config, Status};
use partita_protocol::wire::{
    frame_len, ClientMessage, ErrorCode, ManagerMessage, MAX_CLIENT_FRAME, PROTOCOL_VERSION,
};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The manager's configuration: `batch` admits hints and the application name `solver`;
/// `closed` admits only a uid this process does not have.
pub const CONFIG: &str = "uncontrolled = \"tracked\"
cgroups = false
hello_timeout_ms = 10000

[[partition]]
name = \"batch\"
share = 1
members = { names = [\"solver\"], hint = true }

[[partition]]
name = \"closed\"
share = 1
members = { uids = [4000000000], hint = false }
";

/// Longer than this for one session is a hang (libFuzzer's own `-timeout` is the backstop).
const LIMIT: Duration = Duration::from_secs(5);

/// One reply the model expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `Welcome` in this partition.
    Welcome(String),
    /// `StatusReply` with a status that shows no application.
    Status,
    /// `Confined` to this partition.
    Confined(String),
    /// `Error` with this code (always the last reply).
    Error(ErrorCode),
}

/// What the manager reads next, as its frame reader sees it.
enum Next {
    Message(ClientMessage),
    Refuse(ErrorCode),
    /// Fewer than 4 bytes left: the end of the conversation.
    End,
}

fn next(input: &mut &[u8]) -> Next {
    let Some(prefix) = input.first_chunk::<4>() else {
        return Next::End;
    };
    let len = match frame_len(*prefix, MAX_CLIENT_FRAME) {
        Ok(n) => n,
        Err(e) => return Next::Refuse(e.code()),
    };
    let Some(payload) = input.get(4..4 + len) else {
        return Next::Refuse(ErrorCode::Malformed);
    };
    *input = &input[4 + len..];
    match ClientMessage::decode(payload) {
        Ok(m) => Next::Message(m),
        Err(e) => Next::Refuse(e.code()),
    }
}

/// Where the manager of [`CONFIG`] puts a hello: its hint, else its name's partition.
fn hello_partition(name: &str, hint: &str) -> Result<String, ErrorCode> {
    match hint {
        "" if name == "solver" => Ok("batch".into()),
        "" | "default" => Ok("default".into()),
        "batch" => Ok("batch".into()),
        "closed" => Err(ErrorCode::PermissionDenied),
        _ => Err(ErrorCode::UnknownPartition),
    }
}

/// Where the manager of [`CONFIG`] confines a `partita run` of this process.
fn confine_partition(partition: &str) -> Result<String, ErrorCode> {
    match partition {
        "" | "default" => Ok("default".into()),
        "batch" => Ok("batch".into()),
        "closed" => Err(ErrorCode::PermissionDenied),
        _ => Err(ErrorCode::UnknownPartition),
    }
}

/// The replies the model predicts for `input`.
pub fn expected(mut input: &[u8]) -> Vec<Reply> {
    let input = &mut input;
    match next(input) {
        Next::End => vec![],
        Next::Refuse(c) => vec![Reply::Error(c)],
        Next::Message(ClientMessage::StatusRequest { .. }) => vec![Reply::Status],
        Next::Message(ClientMessage::Confine { partition, .. }) => {
            vec![confine_partition(&partition).map_or_else(Reply::Error, Reply::Confined)]
        }
        Next::Message(ClientMessage::DemandChanged | ClientMessage::Goodbye) => {
            vec![Reply::Error(ErrorCode::OutOfOrder)]
        }
        Next::Message(ClientMessage::Hello(h)) => {
            let mut replies = match hello_partition(&h.name, &h.partition_hint) {
                Ok(p) => vec![Reply::Welcome(p)],
                Err(c) => return vec![Reply::Error(c)],
            };
            loop {
                match next(input) {
                    Next::Message(ClientMessage::DemandChanged) => continue,
                    Next::Message(ClientMessage::Goodbye) | Next::End => break,
                    Next::Message(_) => replies.push(Reply::Error(ErrorCode::OutOfOrder)),
                    Next::Refuse(c) => replies.push(Reply::Error(c)),
                }
                break;
            }
            replies
        }
    }
}

/// The manager under test and what the checks remember between sessions.
struct Fixture {
    harness: Harness,
    /// The last application id a welcome carried (ids are never reused).
    last_id: u32,
    managed: Vec<usize>,
}

fn fixture() -> &'static Mutex<Fixture> {
    static F: OnceLock<Mutex<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        // libFuzzer's C++ `main` does not ignore SIGPIPE as a Rust program does; a manager
        // writing to a client that left must get EPIPE, as in `partita serve`.
        // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        // SAFETY: geteuid has no preconditions.
        assert_ne!(
            unsafe { libc::geteuid() },
            4_000_000_000,
            "CONFIG assumes another uid"
        );
        let config = Config::from_toml_str(CONFIG).expect("CONFIG parses");
        let harness = Harness::new(config).expect("a manager harness");
        let managed = harness.status().cpus;
        Mutex::new(Fixture {
            harness,
            last_id: 0,
            managed,
        })
    })
}

/// Run one session with `input` and check it against the model and the invariants.
pub fn check(input: &[u8]) {
    let mut f = fixture().lock().unwrap_or_else(|p| p.into_inner());
    let refused_before = refusals(&f.harness.status());
    let session = f
        .harness
        .session(input, LIMIT)
        .unwrap_or_else(|e| panic!("session: {e}"));
    let want = expected(input);
    let got = replies(&session, &mut f);
    assert_eq!(got, want, "replies to {input:?}: {:?}", session.frames());
    let status = f.harness.status();
    assert!(
        status.applications.is_empty(),
        "an application outlived its connection: {:?}",
        status.applications
    );
    assert_eq!(f.harness.open_connections(), 0, "a connection slot leaked");
    let refused = matches!(want.last(), Some(Reply::Error(_))) as u64;
    assert_eq!(
        refusals(&status),
        refused_before + refused,
        "refusals miscounted"
    );
}

fn refusals(s: &Status) -> u64 {
    s.refusals.values().sum()
}

/// The session's replies in the model's terms, checking what the model leaves open (ids,
/// CPU sets, the status's content).
fn replies(session: &Session, f: &mut Fixture) -> Vec<Reply> {
    let frames = session
        .frames()
        .unwrap_or_else(|e| panic!("undecodable reply {:?}: {e}", session.reply));
    let mut out = Vec::new();
    for m in frames {
        out.push(match m {
            ManagerMessage::Welcome {
                version,
                app_id,
                partition,
            } => {
                assert_eq!(version, PROTOCOL_VERSION);
                assert!(app_id > f.last_id, "application id {app_id} reused");
                f.last_id = app_id;
                Reply::Welcome(partition)
            }
            ManagerMessage::StatusReply { json } => {
                let s: Status = serde_json::from_str(&json).expect("the status reply is a Status");
                assert!(s.applications.is_empty(), "{:?}", s.applications);
                Reply::Status
            }
            ManagerMessage::Confined { partition, cpus } => {
                assert!(!cpus.is_empty(), "confined to no CPU");
                assert!(
                    cpus.iter().all(|c| f.managed.contains(&c)),
                    "{cpus} not managed"
                );
                Reply::Confined(partition)
            }
            ManagerMessage::Error { code, message } => {
                assert!(!message.is_empty(), "{code:?} without a message");
                Reply::Error(code)
            }
        });
    }
    out
}

//! The socket messages: length-prefixed frames with a kind byte and little-endian fields.
//!
//! Frame: `u32` little-endian payload length, then the payload: one kind byte and the fields of
//! that kind. Strings are a `u16` length and UTF-8 bytes without control characters (the
//! encoder replaces them with U+FFFD and cuts a string at its limit). Every field is validated on decode;
//! a frame longer than the limit of its direction is rejected before it is read.
//!
//! Order on a connection: the client's first message is [`ClientMessage::Hello`] (a runtime
//! registering), [`ClientMessage::StatusRequest`] (`partita status`) or
//! [`ClientMessage::Confine`] (`partita run`). After a `Welcome` the client may send
//! [`ClientMessage::DemandChanged`] (a doorbell: the demand itself is in the control page) and
//! [`ClientMessage::Goodbye`]. Anything else is out of order: the manager replies
//! [`ManagerMessage::Error`] and closes.

use crate::cpuset::CpuSet;

/// Protocol version this crate speaks.
pub const PROTOCOL_VERSION: u16 = 1;
/// Largest frame a client may send (bytes of payload).
pub const MAX_CLIENT_FRAME: usize = 4096;
/// Largest frame the manager may send (a status reply can be large).
pub const MAX_MANAGER_FRAME: usize = 16 << 20;
/// Longest application or partition name, in bytes.
pub const MAX_NAME: usize = 64;
/// Longest error text, in bytes.
pub const MAX_MESSAGE: usize = 1024;

/// Hello flag: the application wants its CPU set only (no change of its worker target).
pub const FLAG_PARTITION_ONLY: u32 = 1;
/// Hello flag: the application is a build served by a GNU make jobserver (`partita run
/// --jobserver`); its `active` field counts tokens handed out, `demand` the jobs that could run.
pub const FLAG_JOBSERVER: u32 = 2;
/// All flags this version knows.
pub const KNOWN_FLAGS: u32 = FLAG_PARTITION_ONLY | FLAG_JOBSERVER;

/// What a client sends.
///
/// ```
/// use partita_protocol::wire::{ClientMessage, Hello};
/// let msg = ClientMessage::Hello(Hello::new(4, "fib"));
/// let frame = msg.encode();
/// let (len, payload) = frame.split_at(4);
/// assert_eq!(u32::from_le_bytes(len.try_into().unwrap()) as usize, payload.len());
/// assert_eq!(ClientMessage::decode(payload).unwrap(), msg);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMessage {
    /// Register the calling process as an application.
    Hello(Hello),
    /// The demand in the control page changed; reallocate now.
    DemandChanged,
    /// Ask for the manager's status (JSON).
    StatusRequest {
        /// Client protocol version.
        version: u16,
    },
    /// Confine the calling process (and what it will exec) to a partition, as uncontrolled.
    Confine {
        /// Client protocol version.
        version: u16,
        /// Partition name (empty: the default partition).
        partition: String,
    },
    /// The application is leaving.
    Goodbye,
}

/// The registration message.
///
/// ```
/// let h = partita_protocol::wire::Hello::new(8, "solver");
/// assert_eq!(h.version, partita_protocol::PROTOCOL_VERSION);
/// assert!(h.partition_hint.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Client protocol version.
    pub version: u16,
    /// Worker threads in the pool.
    pub pool_size: u32,
    /// Flags (`FLAG_*`).
    pub flags: u32,
    /// Application name (for status and membership rules).
    pub name: String,
    /// Partition the application would like (honoured only if the partition's rule allows).
    pub partition_hint: String,
}

impl Hello {
    /// A hello for this protocol version with no hint and no flags.
    ///
    /// ```
    /// let h = partita_protocol::wire::Hello::new(2, "x");
    /// assert_eq!(h.pool_size, 2);
    /// ```
    pub fn new(pool_size: u32, name: &str) -> Self {
        Hello {
            version: PROTOCOL_VERSION,
            pool_size,
            flags: 0,
            name: name.to_string(),
            partition_hint: String::new(),
        }
    }
}

/// What the manager sends.
///
/// ```
/// use partita_protocol::wire::{ManagerMessage, ErrorCode};
/// let msg = ManagerMessage::Error { code: ErrorCode::TooManyApplications, message: "full".into() };
/// let frame = msg.encode();
/// assert_eq!(ManagerMessage::decode(&frame[4..]).unwrap(), msg);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManagerMessage {
    /// Registration accepted; the control page's fd travels with this message (SCM_RIGHTS).
    Welcome {
        /// Manager protocol version.
        version: u16,
        /// Identifier of the application in this manager.
        app_id: u32,
        /// Partition the application was placed in.
        partition: String,
    },
    /// A typed error; the manager closes the connection after it.
    Error {
        /// What went wrong.
        code: ErrorCode,
        /// Human-readable detail.
        message: String,
    },
    /// Reply to a status request: JSON of the manager's `Status`.
    StatusReply {
        /// UTF-8 JSON.
        json: String,
    },
    /// Reply to `Confine`: the CPUs the caller is now confined to.
    Confined {
        /// Partition the caller was placed in.
        partition: String,
        /// Its CPU set at the time of the reply.
        cpus: CpuSet,
    },
}

/// Error codes carried by [`ManagerMessage::Error`].
///
/// ```
/// use partita_protocol::wire::ErrorCode;
/// assert_eq!(ErrorCode::from_u16(ErrorCode::Timeout as u16), ErrorCode::Timeout);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    /// The message could not be decoded.
    Malformed = 1,
    /// The frame was larger than allowed.
    Oversized = 2,
    /// Unsupported protocol version.
    Version = 3,
    /// The message is not valid at this point of the conversation.
    OutOfOrder = 4,
    /// The manager has as many applications as it accepts.
    TooManyApplications = 5,
    /// The client said nothing in time.
    Timeout = 6,
    /// The manager failed internally (e.g. could not create the page).
    Internal = 7,
    /// The requested partition does not exist or does not admit the caller.
    UnknownPartition = 8,
    /// The caller may not do this.
    PermissionDenied = 9,
    /// A code this version does not know.
    Unknown = 0xffff,
}

impl ErrorCode {
    /// Decode; unknown values map to [`ErrorCode::Unknown`].
    ///
    /// ```
    /// assert_eq!(partita_protocol::wire::ErrorCode::from_u16(77), partita_protocol::wire::ErrorCode::Unknown);
    /// ```
    pub fn from_u16(v: u16) -> Self {
        match v {
            1 => ErrorCode::Malformed,
            2 => ErrorCode::Oversized,
            3 => ErrorCode::Version,
            4 => ErrorCode::OutOfOrder,
            5 => ErrorCode::TooManyApplications,
            6 => ErrorCode::Timeout,
            7 => ErrorCode::Internal,
            8 => ErrorCode::UnknownPartition,
            9 => ErrorCode::PermissionDenied,
            _ => ErrorCode::Unknown,
        }
    }
}

/// Why a frame could not be decoded.
///
/// ```
/// let e = partita_protocol::wire::ClientMessage::decode(&[]).unwrap_err();
/// assert_eq!(e, partita_protocol::wire::DecodeError::Empty);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The payload ended before a field.
    #[error("truncated message: needed {need} more bytes for {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes missing.
        need: usize,
    },
    /// The frame is longer than allowed.
    #[error("oversized frame: {len} bytes, limit {max}")]
    Oversized {
        /// Announced length.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// The payload was empty.
    #[error("empty message")]
    Empty,
    /// Unknown kind byte.
    #[error("unknown message kind {0:#04x}")]
    UnknownKind(u8),
    /// A field has a value outside its domain.
    #[error("invalid field {field}: {reason}")]
    InvalidField {
        /// Field name.
        field: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The protocol version is not supported.
    #[error("unsupported protocol version {got} (this side speaks {supported})")]
    Version {
        /// Version received.
        got: u16,
        /// Version spoken here.
        supported: u16,
    },
    /// Bytes after the last field.
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
}

impl DecodeError {
    /// The error code a manager replies with for this error.
    ///
    /// ```
    /// use partita_protocol::wire::{DecodeError, ErrorCode};
    /// assert_eq!(DecodeError::Empty.code(), ErrorCode::Malformed);
    /// ```
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::Oversized { .. } => ErrorCode::Oversized,
            DecodeError::Version { .. } => ErrorCode::Version,
            _ => ErrorCode::Malformed,
        }
    }
}

const K_HELLO: u8 = 1;
const K_DEMAND: u8 = 2;
const K_STATUS_REQ: u8 = 3;
const K_CONFINE: u8 = 4;
const K_GOODBYE: u8 = 5;
const K_WELCOME: u8 = 0x81;
const K_ERROR: u8 = 0x82;
const K_STATUS: u8 = 0x83;
const K_CONFINED: u8 = 0x84;

struct Writer(Vec<u8>);

impl Writer {
    fn new(kind: u8) -> Self {
        let mut v = Vec::with_capacity(64);
        v.extend_from_slice(&[0, 0, 0, 0, kind]);
        Writer(v)
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// Strings longer than `max` are cut at a character boundary, and control characters
    /// (which every decoder refuses) become U+FFFD: encode never fails, and what it writes
    /// decodes (an error text or a partition name may come from outside the program).
    fn str(&mut self, s: &str, max: usize) {
        let clean: String;
        let s = if s.chars().any(char::is_control) {
            let replace = |c: char| {
                if c.is_control() {
                    char::REPLACEMENT_CHARACTER
                } else {
                    c
                }
            };
            clean = s.chars().map(replace).collect();
            clean.as_str()
        } else {
            s
        };
        let mut end = s.len().min(max);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u16(end as u16);
        self.0.extend_from_slice(&s.as_bytes()[..end]);
    }
    fn finish(mut self) -> Vec<u8> {
        let len = (self.0.len() - 4) as u32;
        self.0[..4].copy_from_slice(&len.to_le_bytes());
        self.0
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated {
                field,
                need: n - self.buf.len(),
            });
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        let b = self.take(2, field)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, field)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let b = self.take(8, field)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn str(&mut self, field: &'static str, max: usize) -> Result<String, DecodeError> {
        let len = self.u16(field)? as usize;
        if len > max {
            return Err(DecodeError::InvalidField {
                field,
                reason: "too long",
            });
        }
        let b = self.take(len, field)?;
        let s = std::str::from_utf8(b).map_err(|_| DecodeError::InvalidField {
            field,
            reason: "not UTF-8",
        })?;
        if s.chars().any(char::is_control) {
            return Err(DecodeError::InvalidField {
                field,
                reason: "contains control characters",
            });
        }
        Ok(s.to_string())
    }
    fn end(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Trailing(self.buf.len()))
        }
    }
}

fn check_version(v: u16) -> Result<u16, DecodeError> {
    if v == PROTOCOL_VERSION {
        Ok(v)
    } else {
        Err(DecodeError::Version {
            got: v,
            supported: PROTOCOL_VERSION,
        })
    }
}

impl ClientMessage {
    /// Encode as a complete frame (length prefix included).
    ///
    /// ```
    /// let f = partita_protocol::wire::ClientMessage::Goodbye.encode();
    /// assert_eq!(f, vec![1, 0, 0, 0, 5]);
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ClientMessage::Hello(h) => {
                let mut w = Writer::new(K_HELLO);
                w.u16(h.version);
                w.u32(h.pool_size);
                w.u32(h.flags);
                w.str(&h.name, MAX_NAME);
                w.str(&h.partition_hint, MAX_NAME);
                w.finish()
            }
            ClientMessage::DemandChanged => Writer::new(K_DEMAND).finish(),
            ClientMessage::StatusRequest { version } => {
                let mut w = Writer::new(K_STATUS_REQ);
                w.u16(*version);
                w.finish()
            }
            ClientMessage::Confine { version, partition } => {
                let mut w = Writer::new(K_CONFINE);
                w.u16(*version);
                w.str(partition, MAX_NAME);
                w.finish()
            }
            ClientMessage::Goodbye => Writer::new(K_GOODBYE).finish(),
        }
    }

    /// Decode one payload (without the length prefix), validating every field.
    ///
    /// ```
    /// use partita_protocol::wire::{ClientMessage, DecodeError};
    /// assert_eq!(ClientMessage::decode(&[9]), Err(DecodeError::UnknownKind(9)));
    /// ```
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        if payload.len() > MAX_CLIENT_FRAME {
            return Err(DecodeError::Oversized {
                len: payload.len(),
                max: MAX_CLIENT_FRAME,
            });
        }
        let (&kind, rest) = payload.split_first().ok_or(DecodeError::Empty)?;
        let mut r = Reader { buf: rest };
        let msg = match kind {
            K_HELLO => {
                let version = check_version(r.u16("version")?)?;
                let pool_size = r.u32("pool_size")?;
                if pool_size == 0 || pool_size > 65536 {
                    return Err(DecodeError::InvalidField {
                        field: "pool_size",
                        reason: "must be between 1 and 65536",
                    });
                }
                let flags = r.u32("flags")?;
                if flags & !KNOWN_FLAGS != 0 {
                    return Err(DecodeError::InvalidField {
                        field: "flags",
                        reason: "unknown flag bits",
                    });
                }
                let name = r.str("name", MAX_NAME)?;
                if name.is_empty() {
                    return Err(DecodeError::InvalidField {
                        field: "name",
                        reason: "empty",
                    });
                }
                let partition_hint = r.str("partition_hint", MAX_NAME)?;
                ClientMessage::Hello(Hello {
                    version,
                    pool_size,
                    flags,
                    name,
                    partition_hint,
                })
            }
            K_DEMAND => ClientMessage::DemandChanged,
            K_STATUS_REQ => ClientMessage::StatusRequest {
                version: check_version(r.u16("version")?)?,
            },
            K_CONFINE => ClientMessage::Confine {
                version: check_version(r.u16("version")?)?,
                partition: r.str("partition", MAX_NAME)?,
            },
            K_GOODBYE => ClientMessage::Goodbye,
            k => return Err(DecodeError::UnknownKind(k)),
        };
        r.end()?;
        Ok(msg)
    }
}

impl ManagerMessage {
    /// Encode as a complete frame (length prefix included).
    ///
    /// ```
    /// use partita_protocol::wire::ManagerMessage;
    /// let m = ManagerMessage::StatusReply { json: "{}".into() };
    /// assert_eq!(ManagerMessage::decode(&m.encode()[4..]).unwrap(), m);
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ManagerMessage::Welcome {
                version,
                app_id,
                partition,
            } => {
                let mut w = Writer::new(K_WELCOME);
                w.u16(*version);
                w.u32(*app_id);
                w.str(partition, MAX_NAME);
                w.finish()
            }
            ManagerMessage::Error { code, message } => {
                let mut w = Writer::new(K_ERROR);
                w.u16(*code as u16);
                w.str(message, MAX_MESSAGE);
                w.finish()
            }
            ManagerMessage::StatusReply { json } => {
                let mut w = Writer::new(K_STATUS);
                // Cut at a character boundary: the decoder wants UTF-8.
                let mut n = json.len().min(MAX_MANAGER_FRAME - 8);
                while !json.is_char_boundary(n) {
                    n -= 1;
                }
                w.u32(n as u32);
                w.0.extend_from_slice(&json.as_bytes()[..n]);
                w.finish()
            }
            ManagerMessage::Confined { partition, cpus } => {
                let mut w = Writer::new(K_CONFINED);
                w.str(partition, MAX_NAME);
                for word in cpus.words() {
                    w.u64(*word);
                }
                w.finish()
            }
        }
    }

    /// Decode one payload (without the length prefix).
    ///
    /// ```
    /// use partita_protocol::wire::{ManagerMessage, DecodeError};
    /// assert!(matches!(ManagerMessage::decode(&[0x81, 1]), Err(DecodeError::Truncated { .. })));
    /// ```
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        if payload.len() > MAX_MANAGER_FRAME {
            return Err(DecodeError::Oversized {
                len: payload.len(),
                max: MAX_MANAGER_FRAME,
            });
        }
        let (&kind, rest) = payload.split_first().ok_or(DecodeError::Empty)?;
        let mut r = Reader { buf: rest };
        let msg = match kind {
            K_WELCOME => ManagerMessage::Welcome {
                version: check_version(r.u16("version")?)?,
                app_id: r.u32("app_id")?,
                partition: r.str("partition", MAX_NAME)?,
            },
            K_ERROR => ManagerMessage::Error {
                code: ErrorCode::from_u16(r.u16("code")?),
                message: r.str("message", MAX_MESSAGE)?,
            },
            K_STATUS => {
                let n = r.u32("json")? as usize;
                let b = r.take(n, "json")?;
                let json = std::str::from_utf8(b)
                    .map_err(|_| DecodeError::InvalidField {
                        field: "json",
                        reason: "not UTF-8",
                    })?
                    .to_string();
                ManagerMessage::StatusReply { json }
            }
            K_CONFINED => {
                let partition = r.str("partition", MAX_NAME)?;
                let mut words = [0u64; crate::cpuset::CPUSET_WORDS];
                for w in &mut words {
                    *w = r.u64("cpus")?;
                }
                ManagerMessage::Confined {
                    partition,
                    cpus: CpuSet::from_words(words),
                }
            }
            k => return Err(DecodeError::UnknownKind(k)),
        };
        r.end()?;
        Ok(msg)
    }
}

/// Read the length prefix of a frame and check it against `max` before reading the payload.
///
/// ```
/// use partita_protocol::wire::{frame_len, DecodeError};
/// assert_eq!(frame_len([5, 0, 0, 0], 10), Ok(5));
/// assert!(matches!(frame_len([0, 0, 1, 0], 10), Err(DecodeError::Oversized { .. })));
/// assert_eq!(frame_len([0, 0, 0, 0], 10), Err(DecodeError::Empty));
/// ```
pub fn frame_len(prefix: [u8; 4], max: usize) -> Result<usize, DecodeError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len == 0 {
        return Err(DecodeError::Empty);
    }
    if len > max {
        return Err(DecodeError::Oversized { len, max });
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 _.-]{1,64}"
    }

    proptest! {
        #[test]
        fn hello_round_trips(pool in 1u32..=65536, flags in 0u32..=KNOWN_FLAGS, n in name(), hint in "[a-z]{0,64}") {
            let msg = ClientMessage::Hello(Hello { version: PROTOCOL_VERSION, pool_size: pool, flags, name: n, partition_hint: hint });
            let f = msg.encode();
            prop_assert_eq!(frame_len(f[..4].try_into().unwrap(), MAX_CLIENT_FRAME).unwrap(), f.len() - 4);
            prop_assert_eq!(ClientMessage::decode(&f[4..]).unwrap(), msg);
        }

        /// Arbitrary bytes never panic the decoders.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = ClientMessage::decode(&bytes);
            let _ = ManagerMessage::decode(&bytes);
        }

        /// Every strict prefix of a valid message is an error, never a different message.
        #[test]
        fn truncation_is_an_error(n in name(), cut in 0usize..200) {
            let f = ClientMessage::Hello(Hello::new(3, &n)).encode();
            let payload = &f[4..];
            let cut = cut % payload.len();
            prop_assert!(ClientMessage::decode(&payload[..cut]).is_err());
        }

        #[test]
        fn confined_round_trips(cpus in proptest::collection::vec(0usize..1024, 0..20)) {
            let m = ManagerMessage::Confined { partition: "batch".into(), cpus: cpus.into_iter().collect() };
            prop_assert_eq!(ManagerMessage::decode(&m.encode()[4..]).unwrap(), m);
        }
    }

    /// What `Writer::str` should make of `s`: control characters replaced, cut at `max` bytes
    /// on a character boundary (written out independently of the encoder).
    fn cleaned(s: &str, max: usize) -> String {
        let mut out = String::new();
        for c in s.chars() {
            let c = if c.is_control() { '\u{fffd}' } else { c };
            if out.len() + c.len_utf8() > max {
                break;
            }
            out.push(c);
        }
        out
    }

    proptest! {
        /// Whatever text the manager puts in a reply (an OS error, a configured partition
        /// name), the client can decode the reply: control characters do not make it
        /// malformed, long text is cut on a character boundary.
        #[test]
        fn any_text_in_a_reply_decodes(text in prop_oneof![any::<String>(), "[a-zé\\t\\n\\x00\\x7f\\u{85}-\\u{9f}]{0,1100}"], code in any::<u16>()) {
            let code = ErrorCode::from_u16(code);
            let m = ManagerMessage::Error { code, message: text.clone() };
            let want = ManagerMessage::Error { code, message: cleaned(&text, MAX_MESSAGE) };
            prop_assert_eq!(ManagerMessage::decode(&m.encode()[4..]), Ok(want));
            let m = ManagerMessage::Welcome { version: PROTOCOL_VERSION, app_id: 1, partition: text.clone() };
            let want = ManagerMessage::Welcome { version: PROTOCOL_VERSION, app_id: 1, partition: cleaned(&text, MAX_NAME) };
            prop_assert_eq!(ManagerMessage::decode(&m.encode()[4..]), Ok(want));
        }
    }

    /// Found while writing the fuzz targets' round-trip property: an error text with a control
    /// character (e.g. a cgroup path with a tab in a partition name) made the reply
    /// undecodable, so the client saw a malformed frame instead of the refusal.
    #[test]
    fn control_characters_in_replies_are_replaced() {
        let m = ManagerMessage::Error {
            code: ErrorCode::PermissionDenied,
            message: "cannot write /sys/fs/cgroup/a\tb:\n".into(),
        };
        let want = ManagerMessage::Error {
            code: ErrorCode::PermissionDenied,
            message: "cannot write /sys/fs/cgroup/a\u{fffd}b:\u{fffd}".into(),
        };
        assert_eq!(ManagerMessage::decode(&m.encode()[4..]), Ok(want));
    }

    /// A status reply longer than a frame is cut on a character boundary, so it still
    /// decodes (it was cut at a byte count, possibly inside a character).
    #[test]
    fn an_oversized_status_reply_is_cut_on_a_character_boundary() {
        // One ASCII byte first, so that the byte limit falls inside a character.
        let json = format!("a{}", "é".repeat(MAX_MANAGER_FRAME / 2));
        let frame = ManagerMessage::StatusReply { json }.encode();
        assert!(frame.len() - 4 <= MAX_MANAGER_FRAME);
        let Ok(ManagerMessage::StatusReply { json }) = ManagerMessage::decode(&frame[4..]) else {
            panic!("an oversized status reply does not decode");
        };
        assert!(json.len() >= MAX_MANAGER_FRAME - 9 && json[1..].chars().all(|c| c == 'é'));
    }

    #[test]
    fn rejects_bad_fields() {
        let mut h = Hello::new(1, "a");
        h.pool_size = 0;
        let f = ClientMessage::Hello(h.clone()).encode();
        assert!(matches!(
            ClientMessage::decode(&f[4..]),
            Err(DecodeError::InvalidField {
                field: "pool_size",
                ..
            })
        ));
        h.pool_size = 1;
        h.version = 99;
        let f = ClientMessage::Hello(h.clone()).encode();
        assert_eq!(
            ClientMessage::decode(&f[4..]).unwrap_err().code(),
            ErrorCode::Version
        );
        h.version = PROTOCOL_VERSION;
        h.flags = 0x80;
        let f = ClientMessage::Hello(h.clone()).encode();
        assert!(ClientMessage::decode(&f[4..]).is_err());
        h.flags = 0;
        // A control character in a name (the encoder never writes one: patch the bytes).
        h.name = "bad_name".into();
        let mut f = ClientMessage::Hello(h).encode();
        let at = f.iter().position(|&b| b == b'_').unwrap();
        f[at] = b'\n';
        assert_eq!(
            ClientMessage::decode(&f[4..]),
            Err(DecodeError::InvalidField {
                field: "name",
                reason: "contains control characters"
            })
        );
        let mut f = ClientMessage::Goodbye.encode();
        f.push(0);
        assert_eq!(
            ClientMessage::decode(&f[4..]),
            Err(DecodeError::Trailing(1))
        );
    }
}

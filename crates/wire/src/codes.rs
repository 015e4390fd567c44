//! The one registry of codes: the reserved codes of `Error` and `Goodbye`
//! frames ([`CODES`]) and the handshake's refusal codes ([`REFUSALS`]), each
//! with the meaning docs/protocol.md gives it. The constants, the C header's
//! `SHMLINK_REMOTE_*`, protocol.md's two tables and the Python and Go
//! constants are checked against this file (`crates/wire/tests/codes.rs`);
//! Python's are generated from [`CODES`].
//!
//! Also the values those codes travel in: [`RemoteError`] (an `Error` or
//! `Goodbye` body) and [`RefusalCode`].

use std::fmt;

/// Which frame carries a reserved code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// An `Error` frame: one call failed.
    Error,
    /// A `Goodbye` frame: the session ends.
    Goodbye,
}

impl Carrier {
    /// The frame kind's name, as protocol.md writes it.
    pub fn name(self) -> &'static str {
        match self {
            Carrier::Error => "Error",
            Carrier::Goodbye => "Goodbye",
        }
    }
}

/// One reserved code of the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// The constant's name (`CODE_WORKER_DIED`); the C header's name is
    /// `SHMLINK_REMOTE_` and the rest (`SHMLINK_REMOTE_WORKER_DIED`), Go's
    /// `Code` and the rest in camel case (`CodeWorkerDied`).
    pub name: &'static str,
    /// The value on the wire.
    pub value: u32,
    /// The frame that carries it.
    pub carrier: Carrier,
    /// What it means: protocol.md's table says exactly this.
    pub meaning: &'static str,
}

impl Code {
    /// The name the C header gives it.
    pub fn c_name(&self) -> String {
        format!("SHMLINK_REMOTE_{}", self.name.trim_start_matches("CODE_"))
    }

    /// The name the Go binding gives it.
    pub fn go_name(&self) -> String {
        let mut out = String::from("Code");
        for word in self.name.trim_start_matches("CODE_").split('_') {
            let mut c = word.chars();
            if let Some(first) = c.next() {
                out.push(first);
                out.extend(c.flat_map(char::to_lowercase));
            }
        }
        out
    }
}

/// Declares each reserved code once: its constant and its registry entry.
macro_rules! codes {
    ($($name:ident = $value:literal, $carrier:ident, $meaning:literal;)*) => {
        $(
            #[doc = concat!("`", stringify!($carrier), "` code: ", $meaning, ".")]
            pub const $name: u32 = $value;
        )*
        /// Every reserved code, in value order.
        pub const CODES: &[Code] = &[$(Code {
            name: stringify!($name),
            value: $value,
            carrier: Carrier::$carrier,
            meaning: $meaning,
        }),*];
    };
}

codes! {
    CODE_CLOSED = 0x0000_0000, Goodbye,
        "closing normally (an empty `Goodbye` means the same)";
    CODE_HANDLER_PANICKED = 0xFFFF_0001, Error,
        "the handler panicked (crashed); the message is the panic's";
    CODE_RESPONSE_TOO_LARGE = 0xFFFF_0002, Error,
        "the response is larger than the client accepts (its `max_message`, or one frame without chunking) or than the answering side's own `max_message`; the message names both sizes and whose limit it is";
    CODE_HANDLER_EXCEPTION = 0xFFFF_0003, Error,
        "a language binding's handler threw an exception without a code of its own (C++, PHP)";
    CODE_PROTOCOL_ERROR = 0xFFFF_0004, Goodbye,
        "the receiver of this goodbye broke the protocol; the reason says how";
    CODE_SHUTTING_DOWN = 0xFFFF_0005, Goodbye,
        "the server is shutting down (it answered every request it had received)";
    CODE_NOT_ANSWERED = 0xFFFF_0006, Error,
        "a worker took its next call without answering this one, or a server's handler given several pipelined calls at once returned without answering this one";
    CODE_NO_WORKER = 0xFFFF_0010, Error,
        "`shmlink pool`: no worker became free within the queue timeout";
    CODE_QUEUE_FULL = 0xFFFF_0011, Error,
        "`shmlink pool`: the queue of calls waiting for a worker is full";
    CODE_WORKER_DIED = 0xFFFF_0012, Error,
        "`shmlink pool`: the worker running the call died before answering";
    CODE_WORKER_TIMEOUT = 0xFFFF_0013, Error,
        "`shmlink pool`: the worker did not answer within the call timeout (it was killed)";
    CODE_POOL_STOPPING = 0xFFFF_0014, Error,
        "`shmlink pool`: the pool is stopping";
    CODE_NO_WORKERS_START = 0xFFFF_0015, Error,
        "`shmlink pool`: no worker can start (every recent start failed; the message says how)";
    CODE_UNKNOWN_COMMAND = 0xFFFF_0020, Error,
        "`shmlink pool`'s control socket: unknown command";
}

/// The registry entry of a reserved code, if `value` is one.
pub fn reserved(value: u32) -> Option<&'static Code> {
    CODES.iter().find(|c| c.value == value)
}

/// An error a peer answered a call with (an `Error` frame), or the code and
/// reason of a `Goodbye`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteError {
    /// Application-defined code (non-zero by convention), or a reserved one.
    pub code: u32,
    /// Human-readable message.
    pub message: String,
}

impl RemoteError {
    /// A remote error with a code and a message.
    pub fn new(code: u32, message: impl Into<String>) -> Self {
        RemoteError {
            code,
            message: message.into(),
        }
    }

    /// The body of an `Error` or `Goodbye` frame: the code, then the
    /// message as UTF-8.
    pub fn encode(&self) -> Vec<u8> {
        encode_error(self.code, &self.message, usize::MAX)
    }

    /// Decodes the body of an `Error` or a non-empty `Goodbye` frame
    /// (invalid UTF-8 is replaced).
    ///
    /// # Errors
    /// When the body is shorter than the 4-byte code.
    pub fn decode(body: &[u8]) -> Result<RemoteError, crate::frame::FrameError> {
        let code = body
            .get(..4)
            .and_then(|c| c.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or_else(|| {
                crate::frame::FrameError(format!(
                    "error response of {} bytes has no code",
                    body.len()
                ))
            })?;
        Ok(RemoteError {
            code,
            message: String::from_utf8_lossy(&body[4..]).into_owned(),
        })
    }
}

/// The body of an `Error` or `Goodbye` frame with the message cut (at a
/// character boundary) so that the whole body is at most `max` bytes (at
/// least the 4-byte code).
pub fn encode_error(code: u32, message: &str, max: usize) -> Vec<u8> {
    let mut cut = message.len().min(max.saturating_sub(4));
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut v = Vec::with_capacity(4 + cut);
    v.extend_from_slice(&code.to_le_bytes());
    v.extend_from_slice(&message.as_bytes()[..cut]);
    v
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "remote error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for RemoteError {}

/// One refusal code of the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The code, as the welcome's `status` carries it.
    pub code: RefusalCode,
    /// What it means: protocol.md's table says exactly this.
    pub meaning: &'static str,
}

/// Every refusal code, in value order.
pub const REFUSALS: &[Refusal] = &[
    Refusal {
        code: RefusalCode::NotAllowed,
        meaning: "not allowed: the peer's uid/gid is not in the server's policy",
    },
    Refusal {
        code: RefusalCode::Version,
        meaning: "version: no common protocol version",
    },
    Refusal {
        code: RefusalCode::TooManySessions,
        meaning: "too many sessions: the server's `max_sessions` is reached",
    },
    Refusal {
        code: RefusalCode::BadRequest,
        meaning: "bad request: a malformed hello, a wire the listener does not serve, a bad ring size, a `max_message` below 1024, no complete hello by the deadline",
    },
    Refusal {
        code: RefusalCode::ShuttingDown,
        meaning: "shutting down",
    },
    Refusal {
        code: RefusalCode::ServerFailure,
        meaning: "server failure: the server could not set the session up (no memory, no descriptors, no segment)",
    },
];

/// Why a server refused a session. Sent over the wire as a number; numbers are
/// only ever appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalCode {
    /// The peer's uid/gid is not allowed by the server's policy.
    NotAllowed,
    /// No common protocol version.
    Version,
    /// The server has reached its maximum number of sessions.
    TooManySessions,
    /// The hello was malformed or asked for something unsupported.
    BadRequest,
    /// The server is shutting down.
    ShuttingDown,
    /// The server could not set up the session (out of memory, fds…).
    ServerFailure,
    /// A code this version does not know.
    Other(u16),
}

impl RefusalCode {
    /// Wire value.
    pub fn to_wire(self) -> u16 {
        match self {
            RefusalCode::NotAllowed => 1,
            RefusalCode::Version => 2,
            RefusalCode::TooManySessions => 3,
            RefusalCode::BadRequest => 4,
            RefusalCode::ShuttingDown => 5,
            RefusalCode::ServerFailure => 6,
            RefusalCode::Other(n) => n,
        }
    }

    /// From the wire value.
    pub fn from_wire(n: u16) -> Self {
        match n {
            1 => RefusalCode::NotAllowed,
            2 => RefusalCode::Version,
            3 => RefusalCode::TooManySessions,
            4 => RefusalCode::BadRequest,
            5 => RefusalCode::ShuttingDown,
            6 => RefusalCode::ServerFailure,
            n => RefusalCode::Other(n),
        }
    }
}

impl fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            RefusalCode::NotAllowed => "not allowed",
            RefusalCode::Version => "version mismatch",
            RefusalCode::TooManySessions => "too many sessions",
            RefusalCode::BadRequest => "bad request",
            RefusalCode::ShuttingDown => "shutting down",
            RefusalCode::ServerFailure => "server failure",
            RefusalCode::Other(n) => return write!(f, "code {n}"),
        };
        f.write_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_round_trip() {
        let e = RemoteError::new(42, "no such key");
        assert_eq!(RemoteError::decode(&e.encode()), Ok(e));
        assert!(RemoteError::decode(b"ab").is_err());
    }

    #[test]
    fn error_bodies_are_cut_to_fit_at_a_character_boundary() {
        let b = encode_error(7, "ééé", 9);
        assert_eq!(b.len(), 8, "4 + two 2-byte characters");
        assert_eq!(
            RemoteError::decode(&b).expect("decodes").message,
            "éé".to_string()
        );
        assert_eq!(encode_error(7, "abc", 2).len(), 4);
    }

    #[test]
    fn the_registry_is_in_value_order_and_each_value_once() {
        assert!(CODES.windows(2).all(|w| w[0].value < w[1].value));
        assert!(REFUSALS
            .iter()
            .enumerate()
            .all(|(i, r)| usize::from(r.code.to_wire()) == i + 1));
        for r in REFUSALS {
            assert_eq!(RefusalCode::from_wire(r.code.to_wire()), r.code);
        }
        assert_eq!(
            reserved(0xFFFF_0012).map(|c| c.name),
            Some("CODE_WORKER_DIED")
        );
        assert_eq!(
            CODES[9].go_name(),
            "CodeWorkerDied",
            "Go's names are camel case"
        );
        assert_eq!(CODES[9].c_name(), "SHMLINK_REMOTE_WORKER_DIED");
    }
}

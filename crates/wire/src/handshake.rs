//! The session handshake: a fixed-size hello from the client, a fixed-size
//! welcome (or refusal) from the server, on the Unix or TCP socket. For `shm:`
//! the welcome carries the segment's memfd with `SCM_RIGHTS`.
//!
//! Version negotiation: each side sends the range it speaks; the server picks
//! the highest version in both ranges, or refuses, naming both ranges.

use crate::codes::RefusalCode;
use crate::frame::FrameError;
use crate::le::{u16_at, u32_at, u64_at};

/// Lowest protocol version this build speaks.
pub const PROTOCOL_MIN: u16 = 1;
/// Highest protocol version this build speaks.
pub const PROTOCOL_MAX: u16 = 1;

/// Capability: messages larger than one frame stream as chunks.
pub const CAP_CHUNKED: u64 = 1;
/// Capability: one-way messages.
pub const CAP_ONE_WAY: u64 = 1 << 1;
/// Capability: the client lends requests from its arena (descriptor,
/// segment and release frames; docs/protocol.md "Arena"). Needs
/// [`CAP_FDS`], which carries the arena's segments.
pub const CAP_DESCRIPTORS: u64 = 1 << 2;
/// Capability: the connecting side serves calls (a worker connecting to its
/// supervisor): after the handshake the accepting side sends the requests
/// and the connecting side answers them. Offered only by workers, agreed
/// only by a worker port (the core's `WorkerPort`).
pub const CAP_SERVE: u64 = 1 << 3;
/// Capability: messages may carry file descriptors (the frame header's
/// `fds` field), passed with `SCM_RIGHTS` on the session's Unix socket.
/// Offered by clients over `shm:` and `unix:`, agreed by servers that
/// accept descriptors (the core's `ServerOptions::accept_fds`); never over
/// `tcp:`.
pub const CAP_FDS: u64 = 1 << 4;
/// Capability: the server lends responses from its own arena, the mirror
/// of [`CAP_DESCRIPTORS`] (the server announces segments and sends
/// descriptors, the client releases). Needs [`CAP_FDS`].
pub const CAP_LENT_RESPONSES: u64 = 1 << 5;
/// Capability: an `shm:` session may continue over its socket when the
/// server cannot give it shared memory (its welcome then names ring sizes
/// 0/0 and carries no segment; frames travel on the socket as on a `unix:`
/// session). Offered by `shm:` clients unless
/// the core's `ClientOptions::shm_required`.
pub const CAP_STREAM_FALLBACK: u64 = 1 << 6;
/// Capability: the server may lend the caller one of its workers on a
/// direct line (a segment of their own) for its calls, and the worker
/// serves such lines (`Line` frames; docs/protocol.md "Direct lines").
/// Offered by `shm:` callers and by workers; agreed by a server whose
/// the core's `ServerOptions::lines` is on (`shmlink pool`) and by a worker
/// port.
pub const CAP_LINES: u64 = 1 << 7;
/// Capability: the hello asks to inspect the server, not for a session.
/// The server (to a peer of its own uid or root) answers with an accepted
/// welcome agreeing to this bit alone, then the inspection report
/// ([`crate::inspect::Report`]), and closes. Offered alone, with ring sizes
/// 0/0 (`shmlink inspect`, the core's `inspect`).
pub const CAP_INSPECT: u64 = 1 << 8;
/// Capability: either side of an `shm:` session may ask the other to ring
/// an eventfd of its own whenever it would wake it (a `Bell` frame carrying
/// the descriptor), so that it can wait for its incoming ring in an event
/// loop (epoll, tokio, asyncio) instead of on the futex. Offered by `shm:`
/// callers; agreed by servers on `shm:` sessions that got their segment.
pub const CAP_BELL: u64 = 1 << 9;
/// Capability: both sides of the session call and send one-way messages.
/// Either side may send `Request` (and, with [`CAP_ONE_WAY`], `OneWay`)
/// frames; each answers the other's requests with `Response` or `Error`.
/// The ids of each side's calls are its own: a `Response` or `Error`
/// always answers a call of its receiver, a `Request` is always the
/// sender's. Offered by clients; agreed by a listener whose sessions are
/// symmetric (the core's `Listener`), never by a server of handler threads
/// or a worker port.
pub const CAP_BOTH_WAYS: u64 = 1 << 10;
/// Capabilities under which descriptors travel on an `shm:` session's
/// control socket (each message's in a record), which then carries nothing
/// else.
pub const CONTROL_FDS: u64 = CAP_FDS | CAP_LINES | CAP_BELL;
/// Capabilities a client's session may have agreed on with a server (not
/// [`CAP_SERVE`], a worker's, nor [`CAP_INSPECT`], an inspection's): what a
/// hand-over's successor can take.
pub const SESSION_CAPS: u64 = CAP_CHUNKED
    | CAP_ONE_WAY
    | CAP_DESCRIPTORS
    | CAP_FDS
    | CAP_LENT_RESPONSES
    | CAP_STREAM_FALLBACK
    | CAP_LINES
    | CAP_BELL;
/// Capabilities this build offers (a worker adds [`CAP_SERVE`]).
pub const CAPS: u64 = CAP_CHUNKED | CAP_ONE_WAY;

const HELLO_MAGIC: [u8; 8] = *b"SHMLNKHI";
const WELCOME_MAGIC: [u8; 8] = *b"SHMLNKOK";
/// Encoded size of a hello.
pub const HELLO_LEN: usize = 48;
/// Encoded size of a welcome, without the refusal text that may follow.
pub const WELCOME_LEN: usize = 56;
/// Longest refusal text.
pub const MAX_REFUSAL_TEXT: usize = 1024;

/// Which data path the client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Shared-memory rings (memfd passed in the welcome).
    Shm = 1,
    /// Frames on the socket itself.
    Stream = 2,
}

/// The client's opening message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Lowest version the client speaks.
    pub version_min: u16,
    /// Highest version the client speaks.
    pub version_max: u16,
    /// Requested data path.
    pub wire: Wire,
    /// Capabilities the client supports.
    pub caps: u64,
    /// Requested ring size, client to server (shm only).
    pub ring_c2s: u32,
    /// Requested ring size, server to client (shm only).
    pub ring_s2c: u32,
    /// Largest message the client accepts.
    pub max_message: u64,
}

/// The server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Welcome {
    /// Session accepted.
    Accepted {
        /// Agreed protocol version.
        version: u16,
        /// Agreed capabilities.
        caps: u64,
        /// Server-assigned session id (for logs).
        session_id: u64,
        /// Ring size, client to server.
        ring_c2s: u32,
        /// Ring size, server to client.
        ring_s2c: u32,
        /// Largest message the server accepts.
        max_message: u64,
    },
    /// Session refused.
    Refused {
        /// Why.
        code: RefusalCode,
        /// The evidence, for the client's error message.
        message: String,
    },
}

impl Hello {
    /// Encodes the hello.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..8].copy_from_slice(&HELLO_MAGIC);
        b[8..10].copy_from_slice(&self.version_min.to_le_bytes());
        b[10..12].copy_from_slice(&self.version_max.to_le_bytes());
        b[12] = self.wire as u8;
        b[16..24].copy_from_slice(&self.caps.to_le_bytes());
        b[24..28].copy_from_slice(&self.ring_c2s.to_le_bytes());
        b[28..32].copy_from_slice(&self.ring_s2c.to_le_bytes());
        b[32..40].copy_from_slice(&self.max_message.to_le_bytes());
        b
    }

    /// Decodes a hello, checking magic, sizes and reserved bytes.
    ///
    /// # Errors
    /// [`FrameError`] naming what is wrong.
    pub fn decode(b: &[u8]) -> Result<Hello, FrameError> {
        if b.len() != HELLO_LEN {
            return Err(FrameError(format!(
                "hello is {} bytes, expected {HELLO_LEN}",
                b.len()
            )));
        }
        if b[0..8] != HELLO_MAGIC {
            return Err(FrameError("not a shmlink hello (bad magic)".into()));
        }
        let wire = match b[12] {
            1 => Wire::Shm,
            2 => Wire::Stream,
            w => return Err(FrameError(format!("unknown wire {w} in hello"))),
        };
        if b[13..16].iter().chain(&b[40..48]).any(|&x| x != 0) {
            return Err(FrameError("reserved hello bytes are not zero".into()));
        }
        let h = Hello {
            version_min: u16_at(b, 8),
            version_max: u16_at(b, 10),
            wire,
            caps: u64_at(b, 16),
            ring_c2s: u32_at(b, 24),
            ring_s2c: u32_at(b, 28),
            max_message: u64_at(b, 32),
        };
        if h.version_min > h.version_max {
            return Err(FrameError(format!(
                "hello version range {}..{} is empty",
                h.version_min, h.version_max
            )));
        }
        Ok(h)
    }
}

/// Picks the highest version both ranges contain.
///
/// # Errors
/// A message naming both ranges when they do not overlap.
pub fn negotiate_version(client: (u16, u16), server: (u16, u16)) -> Result<u16, String> {
    let v = client.1.min(server.1);
    if v < client.0.max(server.0) {
        return Err(format!(
            "no common protocol version: client speaks {}..={}, server speaks {}..={}",
            client.0, client.1, server.0, server.1
        ));
    }
    Ok(v)
}

impl Welcome {
    /// Encodes the welcome (with the refusal text, if any).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; WELCOME_LEN];
        b[0..8].copy_from_slice(&WELCOME_MAGIC);
        match self {
            Welcome::Accepted {
                version,
                caps,
                session_id,
                ring_c2s,
                ring_s2c,
                max_message,
            } => {
                b[8..10].copy_from_slice(&version.to_le_bytes());
                b[16..24].copy_from_slice(&caps.to_le_bytes());
                b[24..32].copy_from_slice(&session_id.to_le_bytes());
                b[32..36].copy_from_slice(&ring_c2s.to_le_bytes());
                b[36..40].copy_from_slice(&ring_s2c.to_le_bytes());
                b[40..48].copy_from_slice(&max_message.to_le_bytes());
            }
            Welcome::Refused { code, message } => {
                let mut text = message.as_bytes();
                if text.len() > MAX_REFUSAL_TEXT {
                    let mut cut = MAX_REFUSAL_TEXT;
                    while !message.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text = &text[..cut];
                }
                b[10..12].copy_from_slice(&code.to_wire().to_le_bytes());
                b[12..16].copy_from_slice(&(text.len() as u32).to_le_bytes());
                b.extend_from_slice(text);
            }
        }
        b
    }

    /// Decodes the fixed part; returns the welcome-to-be and the length of
    /// refusal text that follows (0 for an accepted session). Call
    /// [`Welcome::with_text`] once the text is read.
    ///
    /// # Errors
    /// [`FrameError`] naming what is wrong.
    pub fn decode_fixed(b: &[u8]) -> Result<(Welcome, usize), FrameError> {
        if b.len() != WELCOME_LEN {
            return Err(FrameError(format!(
                "welcome is {} bytes, expected {WELCOME_LEN}",
                b.len()
            )));
        }
        if b[0..8] != WELCOME_MAGIC {
            return Err(FrameError(
                "not a shmlink server (bad magic in welcome)".into(),
            ));
        }
        let status = u16_at(b, 10);
        if status != 0 {
            let len = u32_at(b, 12) as usize;
            if len > MAX_REFUSAL_TEXT {
                return Err(FrameError(format!(
                    "refusal text of {len} bytes exceeds {MAX_REFUSAL_TEXT}"
                )));
            }
            let code = RefusalCode::from_wire(status);
            return Ok((
                Welcome::Refused {
                    code,
                    message: String::new(),
                },
                len,
            ));
        }
        if b[12..16].iter().chain(&b[48..56]).any(|&x| x != 0) {
            return Err(FrameError("reserved welcome bytes are not zero".into()));
        }
        Ok((
            Welcome::Accepted {
                version: u16_at(b, 8),
                caps: u64_at(b, 16),
                session_id: u64_at(b, 24),
                ring_c2s: u32_at(b, 32),
                ring_s2c: u32_at(b, 36),
                max_message: u64_at(b, 40),
            },
            0,
        ))
    }

    /// Attaches the refusal text read after the fixed part.
    pub fn with_text(self, text: &[u8]) -> Welcome {
        match self {
            Welcome::Refused { code, .. } => Welcome::Refused {
                code,
                message: String::from_utf8_lossy(text).into_owned(),
            },
            w => w,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            version_min: 1,
            version_max: 3,
            wire: Wire::Shm,
            caps: CAPS,
            ring_c2s: 65536,
            ring_s2c: 4096,
            max_message: 1 << 20,
        }
    }

    #[test]
    fn hello_round_trips_and_rejects_garbage() {
        assert_eq!(Hello::decode(&hello().encode()), Ok(hello()));
        let mut b = hello().encode();
        b[0] = b'X';
        assert!(Hello::decode(&b).is_err());
        let mut b = hello().encode();
        b[12] = 9;
        assert!(Hello::decode(&b).is_err());
        let mut b = hello().encode();
        b[8] = 5;
        assert!(Hello::decode(&b).is_err(), "empty version range");
        assert!(Hello::decode(&b[..20]).is_err());
    }

    #[test]
    fn welcome_round_trips() {
        let w = Welcome::Accepted {
            version: 1,
            caps: 3,
            session_id: 9,
            ring_c2s: 4096,
            ring_s2c: 8192,
            max_message: 77,
        };
        let b = w.encode();
        assert_eq!(Welcome::decode_fixed(&b), Ok((w, 0)));
        let r = Welcome::Refused {
            code: RefusalCode::NotAllowed,
            message: "uid 1001 not allowed".into(),
        };
        let b = r.encode();
        let (fixed, n) = Welcome::decode_fixed(&b[..WELCOME_LEN]).expect("fixed");
        assert_eq!(fixed.with_text(&b[WELCOME_LEN..WELCOME_LEN + n]), r);
    }

    #[test]
    fn versions_negotiate() {
        assert_eq!(negotiate_version((1, 3), (1, 2)), Ok(2));
        assert!(negotiate_version((3, 4), (1, 2))
            .expect_err("disjoint")
            .contains("3..=4"));
    }
}

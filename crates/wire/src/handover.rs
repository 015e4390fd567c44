//! The hand-over (docs/protocol.md, "Hand-over"): a running server passes
//! its listening sockets and its live sessions to a successor
//! process over a Unix socket, with the descriptors in `SCM_RIGHTS`.
//!
//! ```text
//! successor -> server   Ask       "SLHOASK\0", version_min u16, version_max u16, reserved u32
//! server -> successor   Offer     "SLHOOFFR", version u16, listeners u16, sessions u32,
//!                                 next_session u64, reserved u64          (32 bytes)
//!                       listeners × (ListenerRecord, 8 bytes + address; 1 descriptor)
//!                       sessions  × (SessionRecord, 56 bytes; its descriptors;
//!                                    a stream session's bytes read ahead after it)
//!                       End       "SLHOEND\0"
//!                   or  Refusal   "SLHONO\0\0", text_len u32, reserved u32, text
//! successor -> server   Took      "SLHOTOOK"
//!                   or  Refusal
//! ```
//!
//! Every integer is little-endian; reserved bytes are zero and checked.

use crate::layout::DATA_AT;
use crate::le::{u16_at, u32_at, u64_at};

/// Versions of the hand-over this build speaks.
pub const HANDOVER_MIN: u16 = 1;
/// See [`HANDOVER_MIN`].
pub const HANDOVER_MAX: u16 = 2;
/// Length of an [`Ask`].
pub const ASK_LEN: usize = 16;
/// Length of an [`Offer`] header.
pub const OFFER_LEN: usize = 32;
/// Length of a [`ListenerRecord`] before its address.
pub const LISTENER_LEN: usize = 8;
/// Length of a [`SessionRecord`].
pub const SESSION_LEN: usize = 56;
/// Length of the end marker and of `Took`.
pub const MARK_LEN: usize = 8;
/// Length of a refusal before its text.
pub const REFUSAL_LEN: usize = 16;
/// Longest refusal text.
pub const MAX_HANDOVER_TEXT: usize = 1024;
/// Longest listener address.
pub const MAX_ADDRESS: usize = 4096;
/// Most listeners in an offer.
pub const MAX_LISTENERS: usize = 64;
/// Most sessions in an offer.
pub const MAX_SESSIONS: usize = 65_536;
/// The end of an offer.
pub const END: [u8; 8] = *b"SLHOEND\0";
/// The successor's answer: it took everything.
pub const TOOK: [u8; 8] = *b"SLHOTOOK";

const ASK_MAGIC: [u8; 8] = *b"SLHOASK\0";
const OFFER_MAGIC: [u8; 8] = *b"SLHOOFFR";
const REFUSAL_MAGIC: [u8; 8] = *b"SLHONO\0\0";

/// Why bytes are not a valid hand-over message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverError(pub String);
crate::le::text_error!(HandoverError);

fn bad<T>(what: String) -> Result<T, HandoverError> {
    Err(HandoverError(what))
}

fn exact(b: &[u8], len: usize, what: &str) -> Result<(), HandoverError> {
    if b.len() != len {
        return bad(format!("{what} of {} bytes, not {len}", b.len()));
    }
    Ok(())
}

/// The successor's first message: the versions it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    /// Lowest version.
    pub version_min: u16,
    /// Highest version.
    pub version_max: u16,
}

impl Ask {
    /// This build's ask.
    pub fn ours() -> Ask {
        Ask {
            version_min: HANDOVER_MIN,
            version_max: HANDOVER_MAX,
        }
    }

    /// Its bytes.
    pub fn encode(&self) -> [u8; ASK_LEN] {
        let mut b = [0u8; ASK_LEN];
        b[..8].copy_from_slice(&ASK_MAGIC);
        b[8..10].copy_from_slice(&self.version_min.to_le_bytes());
        b[10..12].copy_from_slice(&self.version_max.to_le_bytes());
        b
    }

    /// Reads an ask.
    ///
    /// # Errors
    /// Another length or magic, reserved bytes set, `version_max <
    /// version_min`.
    pub fn decode(b: &[u8]) -> Result<Ask, HandoverError> {
        exact(b, ASK_LEN, "hand-over ask")?;
        if b[..8] != ASK_MAGIC {
            return bad(format!(
                "hand-over ask starts {:02x?}, not \"SLHOASK\\0\"",
                &b[..8]
            ));
        }
        if u32_at(b, 12) != 0 {
            return bad("hand-over ask has reserved bytes set".into());
        }
        let a = Ask {
            version_min: u16_at(b, 8),
            version_max: u16_at(b, 10),
        };
        if a.version_max < a.version_min {
            return bad(format!(
                "hand-over ask for versions {} to {}",
                a.version_min, a.version_max
            ));
        }
        Ok(a)
    }

    /// The highest version both speak, if any.
    pub fn agree(&self) -> Option<u16> {
        let v = self.version_max.min(HANDOVER_MAX);
        (v >= self.version_min.max(HANDOVER_MIN)).then_some(v)
    }
}

/// The head of an offer: what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// The agreed version.
    pub version: u16,
    /// Listener records that follow.
    pub listeners: u16,
    /// Session records that follow them.
    pub sessions: u32,
    /// The id the successor gives its next new session (every id handed
    /// over is below it).
    pub next_session: u64,
}

impl Offer {
    /// Its bytes.
    pub fn encode(&self) -> [u8; OFFER_LEN] {
        let mut b = [0u8; OFFER_LEN];
        b[..8].copy_from_slice(&OFFER_MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[10..12].copy_from_slice(&self.listeners.to_le_bytes());
        b[12..16].copy_from_slice(&self.sessions.to_le_bytes());
        b[16..24].copy_from_slice(&self.next_session.to_le_bytes());
        b
    }

    /// Whether `b` (at least 8 bytes) starts an offer rather than a refusal.
    pub fn is_offer(b: &[u8]) -> bool {
        b.starts_with(&OFFER_MAGIC)
    }

    /// Reads an offer's head.
    ///
    /// # Errors
    /// Another length or magic, a version outside this build's, reserved
    /// bytes set, no listener, counts over [`MAX_LISTENERS`] or
    /// [`MAX_SESSIONS`], a next session id of 0.
    pub fn decode(b: &[u8]) -> Result<Offer, HandoverError> {
        exact(b, OFFER_LEN, "hand-over offer")?;
        if !Offer::is_offer(b) {
            return bad(format!(
                "hand-over offer starts {:02x?}, not \"SLHOOFFR\"",
                &b[..8]
            ));
        }
        if u64_at(b, 24) != 0 {
            return bad("hand-over offer has reserved bytes set".into());
        }
        let o = Offer {
            version: u16_at(b, 8),
            listeners: u16_at(b, 10),
            sessions: u32_at(b, 12),
            next_session: u64_at(b, 16),
        };
        if !(HANDOVER_MIN..=HANDOVER_MAX).contains(&o.version) {
            return bad(format!(
                "hand-over offer of version {}; this build speaks {HANDOVER_MIN} to {HANDOVER_MAX}",
                o.version
            ));
        }
        if o.listeners == 0 || usize::from(o.listeners) > MAX_LISTENERS {
            return bad(format!(
                "hand-over offer of {} listeners (1 to {MAX_LISTENERS})",
                o.listeners
            ));
        }
        if o.sessions as usize > MAX_SESSIONS {
            return bad(format!(
                "hand-over offer of {} sessions (at most {MAX_SESSIONS})",
                o.sessions
            ));
        }
        if o.next_session == 0 {
            return bad("hand-over offer names next session id 0".into());
        }
        Ok(o)
    }
}

/// What a listening socket serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// `shm:` (a Unix socket).
    Shm = 1,
    /// `unix:`.
    Unix = 2,
    /// `tcp:`.
    Tcp = 3,
}

/// One listening socket: its kind and address; the socket travels with
/// the record's first byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerRecord {
    /// What it serves.
    pub kind: ListenerKind,
    /// The address as the server shows it (`shm:/run/a.sock`).
    pub address: String,
}

impl ListenerRecord {
    /// Its bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; LISTENER_LEN];
        b[0] = self.kind as u8;
        b[4..8].copy_from_slice(&(self.address.len() as u32).to_le_bytes());
        b.extend_from_slice(self.address.as_bytes());
        b
    }

    /// Reads the fixed part: the kind and the address's length.
    ///
    /// # Errors
    /// Another length, an unknown kind, reserved bytes set, an address
    /// longer than [`MAX_ADDRESS`] or empty.
    pub fn decode_fixed(b: &[u8]) -> Result<(ListenerKind, usize), HandoverError> {
        exact(b, LISTENER_LEN, "hand-over listener record")?;
        let kind = match b[0] {
            1 => ListenerKind::Shm,
            2 => ListenerKind::Unix,
            3 => ListenerKind::Tcp,
            k => return bad(format!("hand-over listener of unknown kind {k}")),
        };
        if b[1..4] != [0; 3] {
            return bad("hand-over listener record has reserved bytes set".into());
        }
        let len = u32_at(b, 4) as usize;
        if len == 0 || len > MAX_ADDRESS {
            return bad(format!(
                "hand-over listener address of {len} bytes (1 to {MAX_ADDRESS})"
            ));
        }
        Ok((kind, len))
    }

    /// The record from its fixed part and address bytes.
    ///
    /// # Errors
    /// As [`ListenerRecord::decode_fixed`]; an address that is not UTF-8
    /// or not as long as announced.
    pub fn decode(fixed: &[u8], address: &[u8]) -> Result<ListenerRecord, HandoverError> {
        let (kind, len) = ListenerRecord::decode_fixed(fixed)?;
        exact(address, len, "hand-over listener address")?;
        let address = std::str::from_utf8(address)
            .map_err(|_| HandoverError("hand-over listener address is not UTF-8".into()))?;
        Ok(ListenerRecord {
            kind,
            address: address.to_string(),
        })
    }
}

/// Flag of a [`SessionRecord`]: the client's bell (an eventfd) comes third.
pub const SESSION_BELL: u32 = 1;
/// Flag of a [`SessionRecord`]: a stream session (version 2 on): its
/// socket is its one descriptor, it has no rings, and the bytes the server
/// had read from the socket and not yet parsed (`read_ahead` of them)
/// follow the record.
pub const SESSION_STREAM: u32 = 2;
/// Most bytes read ahead a stream session's record carries (a frame's
/// header and its largest chunk, and more).
pub const MAX_READ_AHEAD: u32 = 1 << 21;

/// One live `shm:` session: its agreed terms; its control socket and
/// memfd (and its bell, with [`SESSION_BELL`]) travel with the record's
/// first byte, in that order. Its rings' positions are in the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session id (never reused).
    pub id: u64,
    /// The agreed capabilities.
    pub caps: u64,
    /// The client's largest message.
    pub peer_max: u64,
    /// Ring sizes, client to server and back.
    pub ring_c2s: u32,
    /// See `ring_c2s`.
    pub ring_s2c: u32,
    /// [`SESSION_BELL`], [`SESSION_STREAM`] or 0.
    pub flags: u32,
    /// Which listener (by its index in the offer) the session came through.
    pub listener: u16,
    /// The last sleep epoch the server announced as the consumer of the
    /// client -> server ring, and as the producer of the server -> client
    /// ring: the successor goes on after them (the client remembers the
    /// epoch it woke last; one announced again would never be woken).
    pub epochs: (u32, u32),
    /// A stream session's bytes read ahead (they follow the record); 0
    /// for an `shm:` one.
    pub read_ahead: u32,
}

impl SessionRecord {
    /// Descriptors that come with it.
    pub fn fds(&self) -> usize {
        if self.flags & SESSION_STREAM != 0 {
            return 1;
        }
        2 + usize::from(self.flags & SESSION_BELL != 0)
    }

    /// Its bytes.
    pub fn encode(&self) -> [u8; SESSION_LEN] {
        let mut b = [0u8; SESSION_LEN];
        b[0..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..16].copy_from_slice(&self.caps.to_le_bytes());
        b[16..24].copy_from_slice(&self.peer_max.to_le_bytes());
        b[24..28].copy_from_slice(&self.ring_c2s.to_le_bytes());
        b[28..32].copy_from_slice(&self.ring_s2c.to_le_bytes());
        b[32..36].copy_from_slice(&self.flags.to_le_bytes());
        b[36..40].copy_from_slice(&(self.fds() as u32).to_le_bytes());
        b[40..42].copy_from_slice(&self.listener.to_le_bytes());
        b[44..48].copy_from_slice(&self.epochs.0.to_le_bytes());
        b[48..52].copy_from_slice(&self.epochs.1.to_le_bytes());
        b[52..56].copy_from_slice(&self.read_ahead.to_le_bytes());
        b
    }

    /// Reads a session record of an offer with `listeners` listeners and
    /// next session id `next_session`.
    ///
    /// # Errors
    /// Another length; id 0 or not below `next_session`; unknown flags;
    /// a descriptor count other than the flags say; ring sizes that are
    /// not powers of two from 4096 to 2^28; a listener index outside the
    /// offer; a client limit below 1024; reserved bytes set.
    pub fn decode(
        b: &[u8],
        listeners: u16,
        next_session: u64,
    ) -> Result<SessionRecord, HandoverError> {
        exact(b, SESSION_LEN, "hand-over session record")?;
        let r = SessionRecord {
            id: u64_at(b, 0),
            caps: u64_at(b, 8),
            peer_max: u64_at(b, 16),
            ring_c2s: u32_at(b, 24),
            ring_s2c: u32_at(b, 28),
            flags: u32_at(b, 32),
            listener: u16_at(b, 40),
            epochs: (u32_at(b, 44), u32_at(b, 48)),
            read_ahead: u32_at(b, 52),
        };
        let fds = u32_at(b, 36) as usize;
        if b[42..44] != [0; 2] {
            return bad(format!("hand-over session {} has reserved bytes set", r.id));
        }
        if r.id == 0 || r.id >= next_session {
            return bad(format!(
                "hand-over session id {} (1 to {})",
                r.id,
                next_session - 1
            ));
        }
        // A session agreed on nothing this build does not know, and is
        // never a worker's or an inspection.
        let known = crate::handshake::SESSION_CAPS;
        if r.caps & !known != 0 {
            return bad(format!(
                "hand-over session {} agreed on capabilities {:#x}; this build can take {known:#x}",
                r.id, r.caps
            ));
        }
        if r.flags & !(SESSION_BELL | SESSION_STREAM) != 0
            || r.flags == SESSION_BELL | SESSION_STREAM
        {
            return bad(format!(
                "hand-over session {} with unknown flags {:#x}",
                r.id, r.flags
            ));
        }
        if fds != r.fds() {
            return bad(format!(
                "hand-over session {} announces {fds} descriptors; its flags say {}",
                r.id,
                r.fds()
            ));
        }
        if r.flags & SESSION_STREAM != 0 {
            if r.ring_c2s != 0 || r.ring_s2c != 0 || r.epochs != (0, 0) {
                return bad(format!(
                    "hand-over stream session {} with rings or sleep epochs",
                    r.id
                ));
            }
            if r.read_ahead > MAX_READ_AHEAD {
                return bad(format!(
                    "hand-over stream session {} with {} bytes read ahead (at most {MAX_READ_AHEAD})",
                    r.id, r.read_ahead
                ));
            }
        } else if r.read_ahead != 0 {
            return bad(format!(
                "hand-over shm: session {} with bytes read ahead",
                r.id
            ));
        }
        let ring_ok = |n: u32| n.is_power_of_two() && (DATA_AT as u32..=1 << 28).contains(&n);
        let stream = r.flags & SESSION_STREAM != 0;
        if !stream && (!ring_ok(r.ring_c2s) || !ring_ok(r.ring_s2c)) {
            return bad(format!(
                "hand-over session {} with rings of {} and {} bytes (powers of two from 4096 to 2^28)",
                r.id, r.ring_c2s, r.ring_s2c
            ));
        }
        if r.listener >= listeners {
            return bad(format!(
                "hand-over session {} came through listener {} of {listeners}",
                r.id, r.listener
            ));
        }
        if r.peer_max < crate::frame::MIN_MESSAGE_LIMIT as u64 {
            return bad(format!(
                "hand-over session {} with a client limit of {} bytes (at least {})",
                r.id,
                r.peer_max,
                crate::frame::MIN_MESSAGE_LIMIT
            ));
        }
        Ok(r)
    }
}

/// A refusal's bytes: why the sender will not go on (the text cut to
/// [`MAX_HANDOVER_TEXT`] at a character boundary).
pub fn encode_refusal(text: &str) -> Vec<u8> {
    let mut cut = text.len().min(MAX_HANDOVER_TEXT);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut b = vec![0u8; REFUSAL_LEN];
    b[..8].copy_from_slice(&REFUSAL_MAGIC);
    b[8..12].copy_from_slice(&(cut as u32).to_le_bytes());
    b.extend_from_slice(&text.as_bytes()[..cut]);
    b
}

/// Reads a refusal's fixed part: the length of the text that follows.
///
/// # Errors
/// Another length or magic, reserved bytes set, a text over
/// [`MAX_HANDOVER_TEXT`].
pub fn decode_refusal(b: &[u8]) -> Result<usize, HandoverError> {
    exact(b, REFUSAL_LEN, "hand-over refusal")?;
    if b[..8] != REFUSAL_MAGIC || u32_at(b, 12) != 0 {
        return bad(format!(
            "hand-over message {:02x?} is neither an offer nor a refusal",
            &b[..8]
        ));
    }
    let len = u32_at(b, 8) as usize;
    if len > MAX_HANDOVER_TEXT {
        return bad(format!(
            "hand-over refusal of {len} bytes of text (at most {MAX_HANDOVER_TEXT})"
        ));
    }
    Ok(len)
}

/// Whether `b` (8 bytes) is a refusal's magic.
pub fn is_refusal(b: &[u8]) -> bool {
    b.starts_with(&REFUSAL_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SessionRecord {
        SessionRecord {
            id: 7,
            caps: 0x203,
            peer_max: 1 << 20,
            ring_c2s: 1 << 20,
            ring_s2c: 1 << 20,
            flags: SESSION_BELL,
            listener: 0,
            epochs: (41, 7),
            read_ahead: 0,
        }
    }

    fn stream_session() -> SessionRecord {
        SessionRecord {
            id: 8,
            caps: 0x1,
            peer_max: 1 << 20,
            ring_c2s: 0,
            ring_s2c: 0,
            flags: SESSION_STREAM,
            listener: 1,
            epochs: (0, 0),
            read_ahead: 40,
        }
    }

    #[test]
    fn every_message_round_trips() {
        let a = Ask::ours();
        assert_eq!(Ask::decode(&a.encode()), Ok(a));
        assert_eq!(a.agree(), Some(2));
        let o = Offer {
            version: 1,
            listeners: 2,
            sessions: 1,
            next_session: 9,
        };
        assert_eq!(Offer::decode(&o.encode()), Ok(o));
        let l = ListenerRecord {
            kind: ListenerKind::Shm,
            address: "shm:/run/a.sock".into(),
        };
        let b = l.encode();
        assert_eq!(ListenerRecord::decode(&b[..8], &b[8..]), Ok(l));
        let s = session();
        assert_eq!(SessionRecord::decode(&s.encode(), 2, 9), Ok(s));
        assert_eq!(s.fds(), 3);
        let t = stream_session();
        assert_eq!(SessionRecord::decode(&t.encode(), 2, 9), Ok(t));
        assert_eq!(t.fds(), 1);
        let r = encode_refusal("no");
        assert_eq!(decode_refusal(&r[..REFUSAL_LEN]), Ok(2));
        assert!(is_refusal(&r) && !Offer::is_offer(&r));
    }

    #[test]
    fn bad_messages_are_named() {
        let mut a = Ask::ours().encode();
        a[8] = 3; // min 3 > max 2
        assert!(Ask::decode(&a)
            .expect_err("min over max")
            .0
            .contains("versions 3 to 2"));
        assert_eq!(
            Ask {
                version_min: 3,
                version_max: 4
            }
            .agree(),
            None
        );
        let o = Offer {
            version: 3,
            listeners: 1,
            sessions: 0,
            next_session: 1,
        };
        assert!(Offer::decode(&o.encode())
            .expect_err("v3")
            .0
            .contains("version 3"));
        let s = session();
        let e = SessionRecord::decode(&s.encode(), 2, 7).expect_err("id not below next");
        assert!(e.0.contains("session id 7"), "{e}");
        let mut b = s.encode();
        b[36] = 2;
        assert!(SessionRecord::decode(&b, 2, 9)
            .expect_err("fds")
            .0
            .contains("announces 2"));
        let mut b = s.encode();
        b[24..28].copy_from_slice(&3000u32.to_le_bytes());
        assert!(SessionRecord::decode(&b, 2, 9).is_err());
        let mut b = s.encode();
        b[52] = 1; // bytes read ahead on an shm: session
        assert!(SessionRecord::decode(&b, 2, 9).is_err());
        let mut t = stream_session();
        t.read_ahead = MAX_READ_AHEAD + 1;
        assert!(SessionRecord::decode(&t.encode(), 2, 9).is_err());
        let mut t = stream_session();
        t.ring_c2s = 4096;
        assert!(SessionRecord::decode(&t.encode(), 2, 9).is_err());
        let mut t = stream_session();
        t.flags |= SESSION_BELL;
        assert!(SessionRecord::decode(&t.encode(), 2, 9).is_err());
        let e = SessionRecord::decode(&s.encode(), 0, 9).expect_err("listener");
        assert!(e.0.contains("listener 0 of 0"), "{e}");
        let mut l = ListenerRecord {
            kind: ListenerKind::Tcp,
            address: "x".into(),
        }
        .encode();
        l[0] = 9;
        assert!(ListenerRecord::decode_fixed(&l[..8]).is_err());
        let long = "é".repeat(600);
        let r = encode_refusal(&long);
        assert_eq!(decode_refusal(&r[..REFUSAL_LEN]), Ok(1024));
    }
}

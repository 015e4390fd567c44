//! Publish/subscribe (docs/protocol.md, "Publish/subscribe"): the messages
//! a publisher and a subscriber exchange in their session, and the layout
//! of a subscriber's queue segment.
//!
//! ```text
//! publisher -> subscriber   call      Attach   "SLPSATCH", 64 bytes, topic
//!                                      (shared mode: 2 descriptors, pool and queue)
//! subscriber -> publisher   answer    empty (attached) or an error (refused)
//! publisher -> subscriber   one-way   Sample   "SLPSSMPL", seq u64, bytes   (copy mode)
//! publisher -> subscriber   one-way   Detach   "SLPSDTCH", text_len u32, reserved u32, text
//! ```
//!
//! Every integer is little-endian; reserved bytes are zero and checked.

use crate::le::{u16_at, u32_at, u64_at};

/// The version of publish/subscribe this build speaks.
pub const PUBSUB_VERSION: u16 = 1;
/// Length of an [`Attach`] before its topic.
pub const ATTACH_LEN: usize = 64;
/// Longest topic name, in bytes.
pub const MAX_TOPIC: usize = 255;
/// Largest sample.
pub const MAX_SAMPLE: u32 = 1 << 30;
/// Most pool slots.
pub const MAX_SLOTS: u32 = 1 << 24;
/// Deepest queue (entries per subscriber).
pub const MAX_DEPTH: u32 = 1 << 16;
/// Most samples a subscriber may hold.
pub const MAX_HELD: u32 = 1 << 16;
/// Largest pool, in bytes.
pub const MAX_POOL: u64 = 1 << 40;
/// Pool slots start at multiples of this.
pub const SLOT_ALIGN: u64 = 64;
/// Length of a copy-mode sample's head (magic and sequence number).
pub const SAMPLE_HEAD_LEN: usize = 16;
/// Length of a detach notice before its text.
pub const DETACH_LEN: usize = 16;
/// Longest detach text.
pub const MAX_DETACH_TEXT: usize = 1024;
/// Offset of a queue segment's entries (after the control block).
pub const QUEUE_ENTRIES_AT: u64 = 1024;
/// Length of one queue entry (`seq u64`, `slot << 32 | len` u64).
pub const QUEUE_ENTRY_LEN: u64 = 16;

const ATTACH_MAGIC: [u8; 8] = *b"SLPSATCH";
const SAMPLE_MAGIC: [u8; 8] = *b"SLPSSMPL";
const DETACH_MAGIC: [u8; 8] = *b"SLPSDTCH";

/// Why bytes are not a valid publish/subscribe message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PubSubError(pub String);
crate::le::text_error!(PubSubError);

fn bad<T>(what: String) -> Result<T, PubSubError> {
    Err(PubSubError(what))
}

/// How samples reach a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// In place: the subscriber maps the publisher's pool read-only and
    /// takes references from its queue segment (`shm:` sessions).
    Shared,
    /// Copied: each sample is a one-way [`Sample`](encode_sample_head)
    /// message (`unix:` and `tcp:`, or an `shm:` session that fell back
    /// to its socket).
    Copy,
}

/// The publisher's offer of a topic, the body of its first call to a new
/// subscriber. In [`Mode::Shared`] the call carries two descriptors: the
/// pool (`slots × slot_stride` bytes, sealed against resizing and against
/// new writable mappings) and the queue segment (`queue_len` bytes, sealed
/// against resizing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    /// The version (this build: [`PUBSUB_VERSION`]).
    pub version: u16,
    /// How samples travel.
    pub mode: Mode,
    /// The topic's name (1 to [`MAX_TOPIC`] bytes of UTF-8).
    pub topic: String,
    /// Largest sample, in bytes.
    pub sample_size: u32,
    /// Slots in the pool (shared mode; 0 in copy mode).
    pub slots: u32,
    /// Entries in the subscriber's queue: samples published and not yet
    /// taken, past which the publisher's policy applies.
    pub depth: u32,
    /// Entries of the returns ring (shared mode: at least `depth +
    /// max_held`; 0 in copy mode).
    pub returns: u32,
    /// Most samples the subscriber may have taken and not given back.
    pub max_held: u32,
    /// Samples kept for subscribers that join late (at most `depth`).
    pub history: u32,
    /// Bytes from one slot to the next (shared mode: a multiple of
    /// [`SLOT_ALIGN`], at least `sample_size`; 0 in copy mode).
    pub slot_stride: u64,
    /// The sequence number the next sample published gets.
    pub next_seq: u64,
    /// Length of the queue segment (shared mode: [`queue_len`]; 0 in copy
    /// mode).
    pub queue_len: u64,
}

/// Length of a queue segment of `depth` entries and `returns` return
/// slots: the control block, the entries, the returns (4 bytes each),
/// rounded up to [`SLOT_ALIGN`].
pub fn queue_len(depth: u32, returns: u32) -> u64 {
    let raw = QUEUE_ENTRIES_AT + u64::from(depth) * QUEUE_ENTRY_LEN + u64::from(returns) * 4;
    raw.div_ceil(SLOT_ALIGN) * SLOT_ALIGN
}

/// Offset of a queue segment's returns ring.
pub fn queue_returns_at(depth: u32) -> u64 {
    QUEUE_ENTRIES_AT + u64::from(depth) * QUEUE_ENTRY_LEN
}

/// The stride of a pool whose samples are up to `sample_size` bytes.
pub fn slot_stride(sample_size: u32) -> u64 {
    u64::from(sample_size.max(1)).div_ceil(SLOT_ALIGN) * SLOT_ALIGN
}

impl Attach {
    /// Descriptors that come with it: 2 in shared mode, none in copy mode.
    pub fn fds(&self) -> usize {
        match self.mode {
            Mode::Shared => 2,
            Mode::Copy => 0,
        }
    }

    /// Length of the pool in bytes (0 in copy mode).
    pub fn pool_len(&self) -> u64 {
        u64::from(self.slots) * self.slot_stride
    }

    /// Its bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; ATTACH_LEN];
        b[..8].copy_from_slice(&ATTACH_MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[10] = match self.mode {
            Mode::Shared => 0,
            Mode::Copy => 1,
        };
        let topic_len = u16::try_from(self.topic.len()).unwrap_or(u16::MAX);
        b[12..14].copy_from_slice(&topic_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.sample_size.to_le_bytes());
        b[20..24].copy_from_slice(&self.slots.to_le_bytes());
        b[24..28].copy_from_slice(&self.depth.to_le_bytes());
        b[28..32].copy_from_slice(&self.returns.to_le_bytes());
        b[32..36].copy_from_slice(&self.max_held.to_le_bytes());
        b[36..40].copy_from_slice(&self.history.to_le_bytes());
        b[40..48].copy_from_slice(&self.slot_stride.to_le_bytes());
        b[48..56].copy_from_slice(&self.next_seq.to_le_bytes());
        b[56..64].copy_from_slice(&self.queue_len.to_le_bytes());
        b.extend_from_slice(self.topic.as_bytes());
        b
    }

    /// Whether `b` starts an attach (a subscriber's first message from its
    /// publisher must).
    pub fn is_attach(b: &[u8]) -> bool {
        b.starts_with(&ATTACH_MAGIC)
    }

    /// Reads an attach.
    ///
    /// # Errors
    /// Too short, another magic or version, reserved bytes set, a topic
    /// length other than what follows or one that is empty, too long or
    /// not UTF-8, and any size outside the limits this module states or
    /// inconsistent with the others (see docs/protocol.md).
    pub fn decode(b: &[u8]) -> Result<Attach, PubSubError> {
        if b.len() < ATTACH_LEN {
            return bad(format!(
                "pub/sub attach of {} bytes, shorter than {ATTACH_LEN}",
                b.len()
            ));
        }
        if !Attach::is_attach(b) {
            return bad(format!(
                "pub/sub attach starts {:02x?}, not \"SLPSATCH\"",
                &b[..8]
            ));
        }
        let version = u16_at(b, 8);
        if version != PUBSUB_VERSION {
            return bad(format!(
                "pub/sub attach of version {version}; this build speaks {PUBSUB_VERSION}"
            ));
        }
        let mode = match b[10] {
            0 => Mode::Shared,
            1 => Mode::Copy,
            m => return bad(format!("pub/sub attach of mode {m} (0 shared, 1 copy)")),
        };
        if b[11] != 0 || u16_at(b, 14) != 0 {
            return bad("pub/sub attach has reserved bytes set".into());
        }
        let topic_len = usize::from(u16_at(b, 12));
        if topic_len == 0 || topic_len > MAX_TOPIC || b.len() != ATTACH_LEN + topic_len {
            return bad(format!(
                "pub/sub attach announces a topic of {topic_len} bytes (1 to {MAX_TOPIC}) and has {} after its head",
                b.len() - ATTACH_LEN
            ));
        }
        let topic = std::str::from_utf8(&b[ATTACH_LEN..])
            .map_err(|_| PubSubError("pub/sub attach's topic is not UTF-8".into()))?
            .to_owned();
        let a = Attach {
            version,
            mode,
            topic,
            sample_size: u32_at(b, 16),
            slots: u32_at(b, 20),
            depth: u32_at(b, 24),
            returns: u32_at(b, 28),
            max_held: u32_at(b, 32),
            history: u32_at(b, 36),
            slot_stride: u64_at(b, 40),
            next_seq: u64_at(b, 48),
            queue_len: u64_at(b, 56),
        };
        a.check()?;
        Ok(a)
    }

    fn check(&self) -> Result<(), PubSubError> {
        let within = |what: &str, v: u32, lo: u32, hi: u32| {
            if v < lo || v > hi {
                return bad(format!("pub/sub attach: {what} {v} (from {lo} to {hi})"));
            }
            Ok(())
        };
        within("sample_size", self.sample_size, 1, MAX_SAMPLE)?;
        within("depth", self.depth, 1, MAX_DEPTH)?;
        within("max_held", self.max_held, 1, MAX_HELD)?;
        within("history", self.history, 0, self.depth)?;
        match self.mode {
            Mode::Copy => {
                if self.slots != 0
                    || self.returns != 0
                    || self.slot_stride != 0
                    || self.queue_len != 0
                {
                    return bad(
                        "pub/sub attach in copy mode names a pool or a queue segment".into(),
                    );
                }
            }
            Mode::Shared => {
                within("slots", self.slots, 1, MAX_SLOTS)?;
                let need = self.depth + self.max_held; // both at most 2^16: no overflow
                within("returns", self.returns, need, need.saturating_mul(2))?;
                if self.slot_stride < u64::from(self.sample_size)
                    || !self.slot_stride.is_multiple_of(SLOT_ALIGN)
                    || self.slot_stride > u64::from(MAX_SAMPLE)
                {
                    return bad(format!(
                        "pub/sub attach: slot_stride {} for samples of {} bytes (a multiple of {SLOT_ALIGN}, at least the sample size)",
                        self.slot_stride, self.sample_size
                    ));
                }
                if self.pool_len() > MAX_POOL {
                    return bad(format!(
                        "pub/sub attach: a pool of {} bytes (at most {MAX_POOL})",
                        self.pool_len()
                    ));
                }
                let want = queue_len(self.depth, self.returns);
                if self.queue_len != want {
                    return bad(format!(
                        "pub/sub attach: queue_len {} for depth {} and {} returns (must be {want})",
                        self.queue_len, self.depth, self.returns
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The head of a copy-mode sample message: magic, then its sequence
/// number; the sample's bytes follow.
pub fn encode_sample_head(seq: u64) -> [u8; SAMPLE_HEAD_LEN] {
    let mut b = [0u8; SAMPLE_HEAD_LEN];
    b[..8].copy_from_slice(&SAMPLE_MAGIC);
    b[8..].copy_from_slice(&seq.to_le_bytes());
    b
}

/// Reads a copy-mode sample message: its sequence number and its bytes.
///
/// # Errors
/// Shorter than its head, or another magic.
pub fn decode_sample(b: &[u8]) -> Result<(u64, &[u8]), PubSubError> {
    if b.len() < SAMPLE_HEAD_LEN || b[..8] != SAMPLE_MAGIC {
        return bad(format!(
            "pub/sub sample message of {} bytes without its \"SLPSSMPL\" head",
            b.len()
        ));
    }
    Ok((u64_at(b, 8), &b[SAMPLE_HEAD_LEN..]))
}

/// A detach notice: why the publisher ends this subscriber's session.
/// Texts longer than [`MAX_DETACH_TEXT`] are cut at a character boundary.
pub fn encode_detach(text: &str) -> Vec<u8> {
    let mut end = text.len().min(MAX_DETACH_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    let mut b = Vec::with_capacity(DETACH_LEN + text.len());
    b.extend_from_slice(&DETACH_MAGIC);
    b.extend_from_slice(&(text.len() as u32).to_le_bytes());
    b.extend_from_slice(&[0u8; 4]);
    b.extend_from_slice(text.as_bytes());
    b
}

/// Whether `b` starts a detach notice.
pub fn is_detach(b: &[u8]) -> bool {
    b.starts_with(&DETACH_MAGIC)
}

/// Reads a detach notice's text.
///
/// # Errors
/// Another magic, reserved bytes set, a length other than what follows or
/// over [`MAX_DETACH_TEXT`], text that is not UTF-8.
pub fn decode_detach(b: &[u8]) -> Result<String, PubSubError> {
    if b.len() < DETACH_LEN || !is_detach(b) {
        return bad(format!(
            "pub/sub detach notice of {} bytes without its \"SLPSDTCH\" head",
            b.len()
        ));
    }
    if u32_at(b, 12) != 0 {
        return bad("pub/sub detach notice has reserved bytes set".into());
    }
    let len = u32_at(b, 8) as usize;
    if len > MAX_DETACH_TEXT || b.len() != DETACH_LEN + len {
        return bad(format!(
            "pub/sub detach notice announces {len} bytes of text (at most {MAX_DETACH_TEXT}) and has {}",
            b.len() - DETACH_LEN
        ));
    }
    std::str::from_utf8(&b[DETACH_LEN..])
        .map(str::to_owned)
        .map_err(|_| PubSubError("pub/sub detach notice's text is not UTF-8".into()))
}

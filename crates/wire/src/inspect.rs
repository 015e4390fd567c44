//! The inspection report (capability bit 8): what a server sends, after an
//! accepted welcome, to a client whose hello asked to inspect it. A
//! header, then one record per session, every field little-endian:
//!
//! ```text
//! header (96 bytes)
//! offset size field
//!  0     8    magic            "SHMLNKIR"
//!  8     2    version          1
//! 10     2    header_len       96 (a reader skips bytes past the fields it knows)
//! 12     2    record_len       96 (likewise, per record)
//! 14     2    reserved         zero
//! 16     4    sessions         records that follow
//! 20     4    server_pid
//! 24     8    uptime_ms        since the server started
//! 32     8    sessions_opened
//! 40     8    sessions_closed
//! 48     8    refused          connections refused
//! 56     8    calls            requests answered
//! 64     8    errors           requests answered with an error
//! 72     8    shm_bytes        shared memory held by sessions
//! 80     4    kept_segments    segments kept for reconnecting processes
//! 84     4    reserved         zero
//! 88     8    kept_bytes       their size
//!
//! record (96 bytes)
//!  0     8    session_id
//!  8     4    peer_pid         0 when unknown (TCP, another pid namespace)
//! 12     4    peer_uid         0xFFFFFFFF when unknown (TCP)
//! 16     1    transport        1 shm, 2 unix, 3 tcp
//! 17     1    flags            bit 0: an shm: session continuing over its socket
//! 18     6    reserved         zero
//! 24     8    age_ms
//! 32     8    messages_in      whole messages the server received
//! 40     8    messages_out     whole messages it sent
//! 48     8    bytes_in         their bodies' bytes
//! 56     8    bytes_out
//! 64     4    ring_c2s         ring size, 0 without shared memory
//! 68     4    fill_c2s         bytes published and not yet consumed
//! 72     4    ring_s2c
//! 76     4    fill_s2c
//! 80     8    arena_own        arena bytes the server maps of its own
//! 88     8    arena_peer       and of the client's
//! ```

use crate::le::{u16_at, u32_at, u64_at};

/// The report's magic.
pub const REPORT_MAGIC: [u8; 8] = *b"SHMLNKIR";
/// The report version this build writes and reads.
pub const REPORT_VERSION: u16 = 1;
/// Size of the header this build writes (the least a reader accepts).
pub const REPORT_HEADER_LEN: usize = 96;
/// Size of a record this build writes (the least a reader accepts).
pub const REPORT_RECORD_LEN: usize = 96;
/// The most records a reader accepts (and a server sends).
pub const MAX_REPORT_SESSIONS: usize = 65_536;
/// The largest header or record length a reader accepts.
pub const MAX_REPORT_PART: usize = 4096;
/// `peer_uid` when the peer's uid is unknown.
pub const UID_UNKNOWN: u32 = u32::MAX;

/// A record's transport byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportTransport {
    /// `shm:` (1).
    Shm = 1,
    /// `unix:` (2).
    Unix = 2,
    /// `tcp:` (3).
    Tcp = 3,
}

impl ReportTransport {
    fn from_byte(b: u8) -> Option<ReportTransport> {
        match b {
            1 => Some(ReportTransport::Shm),
            2 => Some(ReportTransport::Unix),
            3 => Some(ReportTransport::Tcp),
            _ => None,
        }
    }

    /// The address scheme: `shm`, `unix` or `tcp`.
    pub fn scheme(self) -> &'static str {
        match self {
            ReportTransport::Shm => "shm",
            ReportTransport::Unix => "unix",
            ReportTransport::Tcp => "tcp",
        }
    }
}

/// `flags` bit 0: an `shm:` session that continues over its socket.
pub const FLAG_OVER_SOCKET: u8 = 1;

/// A server's totals, as the report's header gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportTotals {
    /// The server's pid.
    pub server_pid: u32,
    /// Milliseconds since the server started.
    pub uptime_ms: u64,
    /// Sessions accepted.
    pub sessions_opened: u64,
    /// Sessions ended.
    pub sessions_closed: u64,
    /// Connections refused.
    pub refused: u64,
    /// Requests answered.
    pub calls: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Shared memory held by sessions.
    pub shm_bytes: u64,
    /// Segments kept for reconnecting processes.
    pub kept_segments: u32,
    /// Their size.
    pub kept_bytes: u64,
}

/// One session, as a report's record gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportSession {
    /// The session's id (as in the server's logs and the welcome).
    pub session_id: u64,
    /// The client's pid, 0 when unknown.
    pub peer_pid: u32,
    /// The client's uid, [`UID_UNKNOWN`] when unknown.
    pub peer_uid: u32,
    /// The listener's transport.
    pub transport: ReportTransport,
    /// [`FLAG_OVER_SOCKET`].
    pub flags: u8,
    /// Milliseconds since the session began.
    pub age_ms: u64,
    /// Whole messages the server received.
    pub messages_in: u64,
    /// Whole messages the server sent.
    pub messages_out: u64,
    /// Bytes of the bodies received.
    pub bytes_in: u64,
    /// Bytes of the bodies sent.
    pub bytes_out: u64,
    /// The client-to-server ring's size (0 without shared memory).
    pub ring_c2s: u32,
    /// Bytes in it not yet consumed.
    pub fill_c2s: u32,
    /// The server-to-client ring's size.
    pub ring_s2c: u32,
    /// Bytes in it not yet consumed.
    pub fill_s2c: u32,
    /// Arena bytes the server maps of its own.
    pub arena_own: u64,
    /// Arena bytes the server maps of the client's.
    pub arena_peer: u64,
}

/// A whole report.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// The header's totals.
    pub totals: ReportTotals,
    /// One record per session.
    pub sessions: Vec<ReportSession>,
}

/// Why a report was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportError(pub String);
crate::le::text_error!(ReportError);

fn put16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

impl ReportTotals {
    /// The header for `sessions` records.
    pub fn encode_header(&self, sessions: u32) -> [u8; REPORT_HEADER_LEN] {
        let mut b = [0u8; REPORT_HEADER_LEN];
        b[0..8].copy_from_slice(&REPORT_MAGIC);
        put16(&mut b, 8, REPORT_VERSION);
        put16(&mut b, 10, REPORT_HEADER_LEN as u16);
        put16(&mut b, 12, REPORT_RECORD_LEN as u16);
        put32(&mut b, 16, sessions);
        put32(&mut b, 20, self.server_pid);
        put64(&mut b, 24, self.uptime_ms);
        put64(&mut b, 32, self.sessions_opened);
        put64(&mut b, 40, self.sessions_closed);
        put64(&mut b, 48, self.refused);
        put64(&mut b, 56, self.calls);
        put64(&mut b, 64, self.errors);
        put64(&mut b, 72, self.shm_bytes);
        put32(&mut b, 80, self.kept_segments);
        put64(&mut b, 88, self.kept_bytes);
        b
    }
}

/// What a header says about the rest: (header_len, record_len, sessions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportShape {
    /// Bytes of the header, at least [`REPORT_HEADER_LEN`].
    pub header_len: usize,
    /// Bytes of each record, at least [`REPORT_RECORD_LEN`].
    pub record_len: usize,
    /// Records that follow.
    pub sessions: usize,
}

impl ReportShape {
    /// Bytes of the whole report.
    pub fn total_len(&self) -> usize {
        self.header_len + self.record_len * self.sessions
    }
}

/// Decodes the first [`REPORT_HEADER_LEN`] bytes of a report: its shape
/// and totals. Refuses a bad magic or version, lengths below this build's
/// or above [`MAX_REPORT_PART`], more than [`MAX_REPORT_SESSIONS`] records,
/// and non-zero reserved bytes.
///
/// # Errors
/// [`ReportError`] naming the field.
pub fn decode_report_header(b: &[u8]) -> Result<(ReportShape, ReportTotals), ReportError> {
    let err = |m: String| Err(ReportError(m));
    if b.len() < REPORT_HEADER_LEN {
        return err(format!(
            "inspection report header of {} bytes; {REPORT_HEADER_LEN} expected",
            b.len()
        ));
    }
    if b[0..8] != REPORT_MAGIC {
        return err("inspection report with a bad magic".into());
    }
    let version = u16_at(b, 8);
    if version != REPORT_VERSION {
        return err(format!(
            "inspection report version {version}; this build reads {REPORT_VERSION}"
        ));
    }
    let header_len = usize::from(u16_at(b, 10));
    let record_len = usize::from(u16_at(b, 12));
    for (what, len, least) in [
        ("header_len", header_len, REPORT_HEADER_LEN),
        ("record_len", record_len, REPORT_RECORD_LEN),
    ] {
        if !(least..=MAX_REPORT_PART).contains(&len) {
            return err(format!(
                "inspection report {what} {len}; {least} to {MAX_REPORT_PART} expected"
            ));
        }
    }
    if u16_at(b, 14) != 0 || u32_at(b, 84) != 0 {
        return err("inspection report header with non-zero reserved bytes".into());
    }
    let sessions = u32_at(b, 16) as usize;
    if sessions > MAX_REPORT_SESSIONS {
        return err(format!(
            "inspection report of {sessions} sessions; at most {MAX_REPORT_SESSIONS}"
        ));
    }
    let totals = ReportTotals {
        server_pid: u32_at(b, 20),
        uptime_ms: u64_at(b, 24),
        sessions_opened: u64_at(b, 32),
        sessions_closed: u64_at(b, 40),
        refused: u64_at(b, 48),
        calls: u64_at(b, 56),
        errors: u64_at(b, 64),
        shm_bytes: u64_at(b, 72),
        kept_segments: u32_at(b, 80),
        kept_bytes: u64_at(b, 88),
    };
    let shape = ReportShape {
        header_len,
        record_len,
        sessions,
    };
    Ok((shape, totals))
}

impl ReportSession {
    /// Encodes the record.
    pub fn encode(&self) -> [u8; REPORT_RECORD_LEN] {
        let mut b = [0u8; REPORT_RECORD_LEN];
        put64(&mut b, 0, self.session_id);
        put32(&mut b, 8, self.peer_pid);
        put32(&mut b, 12, self.peer_uid);
        b[16] = self.transport as u8;
        b[17] = self.flags;
        put64(&mut b, 24, self.age_ms);
        put64(&mut b, 32, self.messages_in);
        put64(&mut b, 40, self.messages_out);
        put64(&mut b, 48, self.bytes_in);
        put64(&mut b, 56, self.bytes_out);
        put32(&mut b, 64, self.ring_c2s);
        put32(&mut b, 68, self.fill_c2s);
        put32(&mut b, 72, self.ring_s2c);
        put32(&mut b, 76, self.fill_s2c);
        put64(&mut b, 80, self.arena_own);
        put64(&mut b, 88, self.arena_peer);
        b
    }

    /// Decodes a record (its first [`REPORT_RECORD_LEN`] bytes). Refuses an
    /// unknown transport, unknown flags, non-zero reserved bytes, and a
    /// fill above its ring's size.
    ///
    /// # Errors
    /// [`ReportError`] naming the field.
    pub fn decode(b: &[u8]) -> Result<ReportSession, ReportError> {
        let err = |m: String| Err(ReportError(m));
        if b.len() < REPORT_RECORD_LEN {
            return err(format!(
                "inspection record of {} bytes; {REPORT_RECORD_LEN} expected",
                b.len()
            ));
        }
        let Some(transport) = ReportTransport::from_byte(b[16]) else {
            return err(format!("inspection record with transport {}", b[16]));
        };
        if b[17] & !FLAG_OVER_SOCKET != 0 {
            return err(format!("inspection record with unknown flags {:#x}", b[17]));
        }
        if b[18..24].iter().any(|&x| x != 0) {
            return err("inspection record with non-zero reserved bytes".into());
        }
        let r = ReportSession {
            session_id: u64_at(b, 0),
            peer_pid: u32_at(b, 8),
            peer_uid: u32_at(b, 12),
            transport,
            flags: b[17],
            age_ms: u64_at(b, 24),
            messages_in: u64_at(b, 32),
            messages_out: u64_at(b, 40),
            bytes_in: u64_at(b, 48),
            bytes_out: u64_at(b, 56),
            ring_c2s: u32_at(b, 64),
            fill_c2s: u32_at(b, 68),
            ring_s2c: u32_at(b, 72),
            fill_s2c: u32_at(b, 76),
            arena_own: u64_at(b, 80),
            arena_peer: u64_at(b, 88),
        };
        if r.fill_c2s > r.ring_c2s || r.fill_s2c > r.ring_s2c {
            return err(format!(
                "inspection record of session {} with a ring fill above its size",
                r.session_id
            ));
        }
        Ok(r)
    }
}

impl Report {
    /// The whole report: header, then the records.
    pub fn encode(&self) -> Vec<u8> {
        let n = self.sessions.len().min(MAX_REPORT_SESSIONS);
        let mut out = Vec::with_capacity(REPORT_HEADER_LEN + n * REPORT_RECORD_LEN);
        out.extend_from_slice(&self.totals.encode_header(n as u32));
        for s in &self.sessions[..n] {
            out.extend_from_slice(&s.encode());
        }
        out
    }

    /// Decodes a whole report, exactly its length.
    ///
    /// # Errors
    /// As [`decode_report_header`] and [`ReportSession::decode`]; a length
    /// other than the header announces.
    pub fn decode(b: &[u8]) -> Result<Report, ReportError> {
        let (shape, totals) = decode_report_header(b)?;
        if b.len() != shape.total_len() {
            return Err(ReportError(format!(
                "inspection report of {} bytes; its header announces {}",
                b.len(),
                shape.total_len()
            )));
        }
        let sessions = b[shape.header_len..]
            .chunks_exact(shape.record_len)
            .map(ReportSession::decode)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Report { totals, sessions })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64) -> ReportSession {
        ReportSession {
            session_id: id,
            peer_pid: 42,
            peer_uid: 1000,
            transport: ReportTransport::Shm,
            flags: 0,
            age_ms: 1500,
            messages_in: 10,
            messages_out: 10,
            bytes_in: 640,
            bytes_out: 640,
            ring_c2s: 1 << 20,
            fill_c2s: 0,
            ring_s2c: 1 << 20,
            fill_s2c: 64,
            arena_own: 0,
            arena_peer: 0,
        }
    }

    #[test]
    fn a_report_round_trips() {
        let r = Report {
            totals: ReportTotals {
                server_pid: 7,
                calls: 20,
                ..ReportTotals::default()
            },
            sessions: vec![record(1), record(2)],
        };
        let b = r.encode();
        assert_eq!(b.len(), REPORT_HEADER_LEN + 2 * REPORT_RECORD_LEN);
        assert_eq!(Report::decode(&b), Ok(r));
    }

    #[test]
    fn longer_parts_are_skipped() {
        let r = Report {
            totals: ReportTotals::default(),
            sessions: vec![record(9)],
        };
        let mut b = r.totals.encode_header(1).to_vec();
        b[10] = 100;
        b[12] = 104;
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&record(9).encode());
        b.extend_from_slice(&[0xAA; 8]);
        assert_eq!(Report::decode(&b), Ok(r));
    }

    #[test]
    fn bad_reports_are_refused() {
        let good = Report {
            totals: ReportTotals::default(),
            sessions: vec![record(1)],
        }
        .encode();
        let refused = |mut b: Vec<u8>, f: &dyn Fn(&mut Vec<u8>), says: &str| {
            f(&mut b);
            let e = Report::decode(&b).expect_err(says);
            assert!(e.0.contains(says), "{e} should say {says}");
        };
        refused(good.clone(), &|b| b[0] = b'X', "magic");
        refused(good.clone(), &|b| b[8] = 2, "version 2");
        refused(good.clone(), &|b| b[10] = 8, "header_len 8");
        refused(good.clone(), &|b| b[14] = 1, "reserved");
        refused(good.clone(), &|b| b[16] = 2, "announces");
        refused(good.clone(), &|b| b.truncate(50), "header of 50 bytes");
        refused(good.clone(), &|b| b[96 + 16] = 9, "transport 9");
        refused(good.clone(), &|b| b[96 + 17] = 2, "flags");
        refused(good.clone(), &|b| b[96 + 19] = 1, "reserved");
        refused(good.clone(), &|b| b[96 + 79] = 0x7F, "fill above");
        refused(good, &|b| b[16..20].copy_from_slice(&[0xFF; 4]), "sessions");
    }
}

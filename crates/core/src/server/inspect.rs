//! Answers a hello that asks to inspect the server (capability bit 8): to
//! a peer of the server's uid or root, an accepted welcome then the report
//! of its sessions and totals (`shmlink_wire::inspect`), and the connection
//! closes. No session is opened, no slot taken.

use std::process;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::conn::send_welcome;
use super::registry::Entry;
use super::shared::{Mode, Shared};
use crate::address::Transport;
use crate::error::RefusalCode;
use crate::link::stream::{Patience, Stream};
use crate::segment::Direction;
use shmlink_wire::handshake::{self, Hello, Welcome, Wire, CAP_INSPECT};
use shmlink_wire::inspect::{
    Report, ReportSession, ReportTotals, ReportTransport, FLAG_OVER_SOCKET, UID_UNKNOWN,
};

/// The hello, the peer's uid (when the socket tells it) and the listener's
/// transport.
pub(super) type Asked = (Hello, Option<u32>, Transport);

/// The welcome for an inspection the rules allow, else the refusal's code
/// and text: only the server's uid or root (on a Unix socket), not at a
/// worker port, a hello offering bit 8 alone with ring sizes 0/0, the
/// listener's wire and a common version.
pub(super) fn admit(
    shared: &Shared,
    (hello, uid, transport): &Asked,
    address: &str,
) -> Result<Welcome, (RefusalCode, String)> {
    let bad = |why: String| {
        (
            RefusalCode::BadRequest,
            format!("server at {address}: {why}"),
        )
    };
    match shared.mode {
        Mode::Serve => {}
        Mode::TakeWorkers => {
            return Err(bad(
                "a worker port cannot be inspected; inspect the supervisor's listen addresses"
                    .into(),
            ))
        }
        Mode::Peers => {
            return Err(bad(
                "a listener's sessions belong to whoever accepted them; it cannot be inspected"
                    .into(),
            ))
        }
    }
    shared
        .policy
        .may_inspect(*uid, address)
        .map_err(|why| (RefusalCode::NotAllowed, why))?;
    let version = handshake::negotiate_version(
        (hello.version_min, hello.version_max),
        (handshake::PROTOCOL_MIN, handshake::PROTOCOL_MAX),
    )
    .map_err(|why| (RefusalCode::Version, format!("server at {address}: {why}")))?;
    if hello.caps != CAP_INSPECT {
        return Err(bad(format!(
            "an inspection hello offers capability bit 8 alone, not {:#x}",
            hello.caps
        )));
    }
    let wire = if *transport == Transport::Shm {
        Wire::Shm
    } else {
        Wire::Stream
    };
    if hello.wire != wire || hello.ring_c2s != 0 || hello.ring_s2c != 0 {
        return Err(bad(format!(
            "an inspection hello names this listener's wire ({wire:?}) and ring sizes 0/0"
        )));
    }
    Ok(Welcome::Accepted {
        version,
        caps: CAP_INSPECT,
        session_id: shared.next_session_id(),
        ring_c2s: 0,
        ring_s2c: 0,
        max_message: shared.opts.max_message_size as u64,
    })
}

/// Sends the welcome, then the report; the caller closes the connection.
/// A peer gone on the way is no one's concern.
pub(super) fn answer(shared: &Shared, conn: &Stream, welcome: &Welcome, patience: &Patience) {
    if send_welcome(conn, welcome, None, patience).is_ok() {
        let _ = conn.write_all_by(&report(shared).encode(), patience);
    }
}

/// The server's sessions and totals now.
pub(crate) fn report(shared: &Shared) -> Report {
    let now = Instant::now();
    let stats = &shared.stats;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let (kept_segments, kept_bytes) = shared.reusable.held();
    let totals = ReportTotals {
        server_pid: process::id(),
        uptime_ms: millis(now.duration_since(shared.started)),
        sessions_opened: get(&stats.sessions_opened),
        sessions_closed: get(&stats.sessions_closed),
        refused: get(&stats.refused),
        calls: get(&stats.calls),
        errors: get(&stats.errors),
        shm_bytes: shared.shm_held(),
        kept_segments,
        kept_bytes,
    };
    let sessions = shared
        .registry
        .snapshot()
        .iter()
        .map(|(id, e)| record(*id, e, now))
        .collect();
    Report { totals, sessions }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One session's record. Ring positions are the peer's to write: a fill
/// is clamped to its ring's size, whatever they say.
fn record(id: u64, e: &Entry, now: Instant) -> ReportSession {
    let a = &e.about;
    let c = a.tally.counts();
    let ring = |dir: Direction, len: u64| {
        let h = e.segment().map(|s| s.ring_header(dir));
        let fill = h.map_or(0, |h| {
            let tail = h.tail.load(Ordering::Acquire);
            let head = h.head.load(Ordering::Acquire);
            tail.wrapping_sub(head).min(len)
        });
        (
            u32::try_from(len).unwrap_or(u32::MAX),
            u32::try_from(fill).unwrap_or(u32::MAX),
        )
    };
    let layout = e.segment().map(|s| *s.layout());
    let (ring_c2s, fill_c2s) = ring(Direction::ClientToServer, layout.map_or(0, |l| l.c2s_len));
    let (ring_s2c, fill_s2c) = ring(Direction::ServerToClient, layout.map_or(0, |l| l.s2c_len));
    let transport = match a.transport {
        Transport::Shm => ReportTransport::Shm,
        Transport::Unix => ReportTransport::Unix,
        Transport::Tcp => ReportTransport::Tcp,
    };
    let over_socket = a.transport == Transport::Shm && layout.is_none();
    ReportSession {
        session_id: id,
        peer_pid: a.pid.and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
        peer_uid: a.uid.unwrap_or(UID_UNKNOWN),
        transport,
        flags: if over_socket { FLAG_OVER_SOCKET } else { 0 },
        age_ms: millis(now.duration_since(a.since)),
        messages_in: c.messages_in,
        messages_out: c.messages_out,
        bytes_in: c.bytes_in,
        bytes_out: c.bytes_out,
        ring_c2s,
        fill_c2s,
        ring_s2c,
        fill_s2c,
        arena_own: c.arena_own,
        arena_peer: c.arena_peer,
    }
}

//! Direct lines (capability bit 7): a supervisor lends one of its workers to
//! a caller for a run of calls, over a segment of their own, so that those
//! calls go from the caller to the worker with no relay in between.
//!
//! - The caller asks on its session with the supervisor (`Ask`); the
//!   supervisor answers `Deny`, or makes a line ([`make`]: a fresh segment
//!   and a socket pair), hands the worker its end (`Grant` on the worker's
//!   session) and the caller its own (`Grant`).
//! - Each side opens its end ([`attach`]) and the caller's calls go over
//!   the line; the worker serves it until the caller leaves, its call limit
//!   is reached or the supervisor revokes it (`Revoke`, then a ring of the
//!   line's bell); then it says goodbye on the line and tells the
//!   supervisor (`Returned`, with the calls it served).
//! - A request the worker never read (provably, in the ring) when the line
//!   ends goes through the supervisor instead.
//!
//! A line's segment is used by that line only, so a worker holding on to
//! its mapping after the line ends sees nothing of the caller's later calls.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::link::shm::ShmLink;
use crate::link::Link;
use crate::options::WaitStrategy;
use crate::segment::{Endpoints, Segment};
use crate::session::Session;
use crate::watch::{Spinner, Watch};
use shmlink_wire::handshake::CAP_CHUNKED;
use shmlink_wire::line::{LineBody, Op};

/// A line made by a supervisor, before its ends are handed out.
#[derive(Debug)]
pub(crate) struct Made {
    /// The supervisor's own mapping: it rings the worker's bell to revoke.
    pub(crate) segment: Arc<Segment>,
    pub(crate) memfd: OwnedFd,
    pub(crate) worker_end: UnixStream,
    pub(crate) caller_end: UnixStream,
}

/// Makes a line with rings of `c2s` and `s2c` bytes.
///
/// # Errors
/// When the kernel refuses the memfd, the mapping or the socket pair.
pub(crate) fn make(c2s: usize, s2c: usize) -> std::io::Result<Made> {
    let (segment, memfd) = Segment::create_named("shmlink-line", c2s, s2c)?;
    segment.prefault_first_pages();
    let (worker_end, caller_end) = UnixStream::pair()?;
    Ok(Made {
        segment: Arc::new(segment),
        memfd,
        worker_end,
        caller_end,
    })
}

/// Which end of a line is opened.
#[derive(Debug)]
pub(crate) enum End {
    /// The caller's: it watches the worker through the socket.
    Caller,
    /// The worker's: it also watches its session with the supervisor, whose
    /// segment this is.
    Worker(Arc<Segment>),
}

/// Opens one end of a line from a grant and its descriptors: the line's
/// session, with `own_max` the largest message this side accepts.
///
/// # Errors
/// A protocol error (for the grant's sender) when the descriptors are not
/// a socket and a segment of the grant's sizes.
pub(crate) fn attach(
    grant: &LineBody,
    fds: Vec<OwnedFd>,
    end: End,
    own_max: usize,
    wait: WaitStrategy,
    name: String,
) -> Result<Session> {
    debug_assert_eq!(grant.op, Op::Grant);
    let bad = |detail: String| Error::Protocol {
        peer: name.clone(),
        detail: format!("line {} granted with {detail}", grant.line),
    };
    let [sock, memfd]: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|v: Vec<OwnedFd>| bad(format!("{} descriptors", v.len())))?;
    let sock = UnixStream::from(sock);
    let segment = Segment::open(&memfd, grant.ring_c2s as usize, grant.ring_s2c as usize)
        .map_err(|e| bad(format!("a segment that fails its checks: {e}")))?;
    let (server_side, watch) = match end {
        End::Caller => (false, Watch::Socket(sock)),
        End::Worker(supervisor) => (true, Watch::Line { sock, supervisor }),
    };
    let ends = Endpoints::new(Arc::new(segment), server_side)
        .map_err(|e| bad(format!("rings that cannot start: {e}")))?;
    let link = Link::Shm(ShmLink::new(ends, Spinner::new(wait), watch, name.clone()).used_once());
    let peer_max = usize::try_from(grant.value).unwrap_or(usize::MAX);
    let session = Session::new(link, own_max, peer_max, CAP_CHUNKED, name);
    // A caller drains answers while it waits for room, as a client does.
    Ok(if server_side {
        session
    } else {
        session.drain_while_sending()
    })
}

/// A caller's ask for a direct line, as [`crate::Handler::line`] sees it:
/// what the line must fit.
#[derive(Debug, Clone, Copy)]
pub struct LineAsk {
    pub(crate) ring_c2s: usize,
    pub(crate) ring_s2c: usize,
    pub(crate) caller_max: usize,
}

impl LineAsk {
    /// The sizes of the asking session's rings, which the line's get.
    pub fn rings(&self) -> (usize, usize) {
        (self.ring_c2s, self.ring_s2c)
    }

    /// The largest message the caller accepts.
    pub fn caller_max(&self) -> usize {
        self.caller_max
    }
}

/// The caller's end of a line a supervisor made
/// ([`crate::Client::lend_line`]), for [`crate::Handler::line`] to return:
/// the server sends it to the caller. Dropped unsent, its socket closes and
/// the worker gives the line back.
#[derive(Debug)]
pub struct LineOffer {
    pub(crate) grant: LineBody,
    pub(crate) sock: UnixStream,
    pub(crate) memfd: OwnedFd,
    /// Whether the line is still lent (its hold neither dropped nor
    /// revoked): the session that sends this grant refuses its client
    /// another line until then.
    pub(crate) out: Arc<AtomicBool>,
}

/// What a supervisor keeps of a line it lent: its id, and its own mapping
/// of the line's segment, through which it rings the worker's bell when it
/// revokes the line ([`crate::Client::revoke_line`]).
/// Dropped when the line is given back (or its worker is gone): only then,
/// or once the line is revoked, may the client it was lent to get another.
#[derive(Debug)]
pub struct LineHold {
    pub(crate) id: u64,
    pub(crate) segment: Arc<Segment>,
    pub(crate) out: Arc<AtomicBool>,
}

impl Drop for LineHold {
    fn drop(&mut self) {
        self.release();
    }
}

impl LineHold {
    /// Lets the client the line was lent to be lent another.
    pub(crate) fn release(&self) {
        self.out.store(false, Ordering::Release);
    }

    /// The line's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Wakes the worker if it sleeps waiting on the line: after a revoke
    /// or a goodbye went on its session with the supervisor, which it then
    /// reads.
    pub fn wake(&self) {
        self.segment.ring_server_bell();
    }
}

/// Line ids, unique in this process (a supervisor's).
static NEXT_LINE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A fresh line id.
pub(crate) fn next_id() -> u64 {
    NEXT_LINE.fetch_add(1, Ordering::Relaxed)
}

//! The successor's side of a hand-over (docs/protocol.md, "Hand-over"):
//! connect to the running server's hand-over socket, ask, receive its
//! listeners and live sessions with their descriptors, check every
//! one as hostile input (a memfd is mapped only after its seals, size and
//! header check out; a listener must listen where its record says), and
//! set the sessions up to go on from where the server stopped: their
//! rings' positions are in the segments. The answer (took, or a refusal
//! naming why) is the caller's to send once everything is set up.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shmlink_sys::fdpass;
use shmlink_sys::net::StreamKind;
use shmlink_wire::frame::Kind;
use shmlink_wire::handover::{
    decode_refusal, encode_refusal, is_refusal, Ask, ListenerRecord, Offer, SessionRecord, END,
    LISTENER_LEN, MARK_LEN, OFFER_LEN, REFUSAL_LEN, SESSION_LEN, SESSION_STREAM, TOOK,
};
use shmlink_wire::handshake::{CAP_DESCRIPTORS, CAP_FDS, CAP_LENT_RESPONSES, CONTROL_FDS};
use shmlink_wire::layout::SegmentHeader;

use super::admit::Established;
use super::listener::Listener;
use super::reuse::ClientProcess;
use super::shared::Shared;
use crate::address::{Address, Transport};
use crate::error::{Error, Result};
use crate::link::shm::ShmLink;
use crate::link::stream::{Stream, StreamLink};
use crate::link::Link;
use crate::segment::{Endpoints, Segment};
use crate::session::Session;
use crate::watch::{SessionFlags, Spinner, Watch};

/// How long the server has for each step of its offer.
const STEP: Duration = Duration::from_secs(10);

/// What a server handed over, not yet set up.
#[derive(Debug)]
pub(crate) struct Offered {
    /// The connection to the server, for the answer.
    pub(crate) conn: UnixStream,
    pub(crate) listeners: Vec<Listener>,
    /// Each session's record, its listener's address, its descriptors and
    /// (a stream session's) bytes read ahead.
    pub(crate) sessions: Vec<(SessionRecord, Address, Vec<OwnedFd>, Vec<u8>)>,
    pub(crate) next_session: u64,
}

impl Offered {
    /// Tells the server everything was taken: it lets go and stops.
    /// Returns the connection, which the server closes once its own
    /// hand-over socket is gone ([`wait_closed`]).
    pub(crate) fn took(self) -> UnixStream {
        let _ = (&self.conn).write_all(&TOOK);
        self.conn
    }

    /// Tells the server why not: it serves on.
    pub(crate) fn refuse(&self, why: &str) {
        let _ = (&self.conn).write_all(&encode_refusal(why));
    }
}

fn failed(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::Bind {
        address: format!("hand-over socket {}", path.display()),
        reason: format!("cannot take the server over: {reason}"),
    }
}

/// Connects to the hand-over socket at `path`, asks, and receives the
/// offer.
///
/// # Errors
/// [`Error::Bind`] naming the socket and why: nobody listens there, the
/// server refused (its text), or its offer is malformed.
pub(crate) fn receive(path: &Path) -> Result<Offered> {
    let fail = |r: String| failed(path, r);
    let conn = UnixStream::connect(path).map_err(|e| fail(format!("connecting: {e}")))?;
    conn.set_read_timeout(Some(STEP))
        .map_err(|e| fail(e.to_string()))?;
    conn.set_write_timeout(Some(STEP))
        .map_err(|e| fail(e.to_string()))?;
    (&conn)
        .write_all(&Ask::ours().encode())
        .map_err(|e| fail(format!("sending the ask: {e}")))?;
    let mut head = [0u8; OFFER_LEN];
    let mut fds = Vec::new();
    read_with(&conn, &mut head[..MARK_LEN], &mut fds).map_err(&fail)?;
    if is_refusal(&head[..MARK_LEN]) {
        return Err(fail(read_refusal(&conn, &head[..MARK_LEN], "the server")));
    }
    read_with(&conn, &mut head[MARK_LEN..], &mut fds).map_err(&fail)?;
    let offer = Offer::decode(&head).map_err(|e| fail(e.to_string()))?;
    no_fds(&fds, "the offer's head").map_err(&fail)?;
    let mut listeners = Vec::new();
    for i in 0..offer.listeners {
        let mut fixed = [0u8; LISTENER_LEN];
        read_with(&conn, &mut fixed, &mut fds).map_err(&fail)?;
        let (_, len) = ListenerRecord::decode_fixed(&fixed).map_err(|e| fail(e.to_string()))?;
        let mut address = vec![0u8; len];
        read_with(&conn, &mut address, &mut fds).map_err(&fail)?;
        let r = ListenerRecord::decode(&fixed, &address).map_err(|e| fail(e.to_string()))?;
        let fd = one_fd(&mut fds, &format!("listener {i}")).map_err(&fail)?;
        let addr: Address = r
            .address
            .parse()
            .map_err(|e| fail(format!("listener {i}: {e}")))?;
        let kind_ok = matches!(
            (r.kind, addr.transport()),
            (shmlink_wire::handover::ListenerKind::Shm, Transport::Shm)
                | (shmlink_wire::handover::ListenerKind::Unix, Transport::Unix)
                | (shmlink_wire::handover::ListenerKind::Tcp, Transport::Tcp)
        );
        if !kind_ok {
            return Err(fail(format!(
                "listener {i}: {:?} record for {addr}",
                r.kind
            )));
        }
        listeners.push(Listener::adopt(&addr, fd).map_err(&fail)?);
    }
    let mut sessions: Vec<(SessionRecord, Address, Vec<OwnedFd>, Vec<u8>)> = Vec::new();
    for _ in 0..offer.sessions {
        let mut fixed = [0u8; SESSION_LEN];
        read_with(&conn, &mut fixed, &mut fds).map_err(&fail)?;
        let r = SessionRecord::decode(&fixed, offer.listeners, offer.next_session)
            .map_err(|e| fail(e.to_string()))?;
        if fds.len() != r.fds() {
            return Err(fail(format!(
                "session {} came with {} descriptors, not {}",
                r.id,
                fds.len(),
                r.fds()
            )));
        }
        let l = &listeners[usize::from(r.listener)];
        let stream = r.flags & SESSION_STREAM != 0;
        if stream && offer.version < 2 {
            return Err(fail(format!(
                "session {} is a stream session in an offer of version {}",
                r.id, offer.version
            )));
        }
        if !stream && l.transport() != Transport::Shm {
            return Err(fail(format!(
                "session {} is an shm: session of listener {}",
                r.id,
                l.address()
            )));
        }
        let mut read_ahead = vec![0u8; r.read_ahead as usize];
        let given = std::mem::take(&mut fds);
        read_with(&conn, &mut read_ahead, &mut fds).map_err(&fail)?;
        no_fds(&fds, "a session's bytes read ahead").map_err(&fail)?;
        if sessions.iter().any(|(s, ..)| s.id == r.id) {
            return Err(fail(format!("session {} is offered twice", r.id)));
        }
        sessions.push((r, l.address().clone(), given, read_ahead));
    }
    let mut end = [0u8; MARK_LEN];
    read_with(&conn, &mut end, &mut fds).map_err(&fail)?;
    if end != END || !fds.is_empty() {
        return Err(fail(format!(
            "the offer ends with {end:02x?}, not its end mark"
        )));
    }
    Ok(Offered {
        conn,
        listeners,
        sessions,
        next_session: offer.next_session,
    })
}

/// Reads exactly `buf.len()` bytes, keeping descriptors that come along.
fn read_with(
    conn: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> std::result::Result<(), String> {
    let mut got = 0;
    while got < buf.len() {
        match fdpass::recv_fds_into(conn, &mut buf[got..], fds, false) {
            Ok(0) => {
                return Err(format!(
                    "the server closed the connection {got} bytes into a {}-byte part",
                    buf.len()
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!(
                    "the server sent nothing for {} s, {got} bytes into a {}-byte part",
                    STEP.as_secs(),
                    buf.len()
                ))
            }
            Err(e) => return Err(format!("reading the offer: {e}")),
        }
        if fds.len() > 3 {
            return Err(format!("{} descriptors came with one record", fds.len()));
        }
    }
    Ok(())
}

fn no_fds(fds: &[OwnedFd], what: &str) -> std::result::Result<(), String> {
    if fds.is_empty() {
        Ok(())
    } else {
        Err(format!("{} descriptors came with {what}", fds.len()))
    }
}

fn one_fd(fds: &mut Vec<OwnedFd>, what: &str) -> std::result::Result<OwnedFd, String> {
    match (fds.pop(), fds.is_empty()) {
        (Some(fd), true) => Ok(fd),
        _ => Err(format!("{what} came without its one descriptor")),
    }
}

/// The refusal `who` ("the server", "the successor") sent, read after its
/// first 8 bytes `head` (which the caller found to be a refusal's).
pub(crate) fn read_refusal(conn: &UnixStream, head: &[u8], who: &str) -> String {
    let mut fixed = [0u8; REFUSAL_LEN];
    fixed[..MARK_LEN].copy_from_slice(head);
    if (&*conn).read_exact(&mut fixed[MARK_LEN..]).is_err() {
        return format!("{who}'s refusal was cut short");
    }
    let Ok(len) = decode_refusal(&fixed) else {
        return format!("{who}'s refusal is malformed");
    };
    let mut text = vec![0u8; len];
    if (&*conn).read_exact(&mut text).is_err() {
        return format!("{who}'s refusal was cut short");
    }
    format!("{who} refused: {}", String::from_utf8_lossy(&text))
}

/// Sets up one handed-over session on this server: maps its segment
/// (checked as a client checks one), takes its control socket and bell,
/// checks its client against this server's policy.
///
/// # Errors
/// Why it cannot go on here, naming the session.
pub(crate) fn establish(
    sh: &Shared,
    r: &SessionRecord,
    address: &Address,
    fds: Vec<OwnedFd>,
    read_ahead: &[u8],
) -> std::result::Result<Established, String> {
    if r.flags & SESSION_STREAM != 0 {
        return establish_stream(sh, r, address, fds, read_ahead);
    }
    let id = r.id;
    let mut fds = fds.into_iter();
    let (Some(ctrl), Some(memfd)) = (fds.next(), fds.next()) else {
        return Err(format!(
            "session {id} came without its control socket and memfd"
        ));
    };
    let bell = fds.next();
    let name = address.to_string();
    let sock = std::os::unix::net::UnixStream::from(ctrl);
    let cred = shmlink_sys::peer_cred(&sock)
        .map_err(|e| format!("session {id}: its control socket is not a Unix socket: {e}"))?;
    sh.policy.check(&cred, &name)?;
    let (c2s, s2c) = (r.ring_c2s as usize, r.ring_s2c as usize);
    let segment = Segment::open(&memfd, c2s, s2c).map_err(|e| format!("session {id}: {e}"))?;
    let ends = Endpoints::new(Arc::new(segment), true).map_err(|e| format!("session {id}: {e}"))?;
    let charge = sh
        .charge_shm(SegmentHeader::for_rings(c2s, s2c).total_len)
        .map_err(|e| format!("session {id}: {e}"))?;
    let flags = Arc::new(SessionFlags::default());
    let conn = Arc::new(Stream::Unix(sock));
    let channel = (r.caps & CONTROL_FDS != 0).then(|| Arc::clone(&conn));
    let watch = Watch::Flags(Arc::clone(&flags));
    let mut link =
        ShmLink::new(ends, Spinner::new(sh.opts.wait), watch, name.clone()).with_fds(channel);
    link.continue_epochs(r.epochs);
    if let Some(bell) = bell {
        let bell = shmlink_sys::eventfd::EventFd::adopt(bell)
            .map_err(|e| format!("session {id}: its bell is not an eventfd: {e}"))?;
        link.take_peer_bell(bell);
    }
    let peer_max = usize::try_from(r.peer_max).unwrap_or(usize::MAX);
    let mut session = Session::new(
        Link::Shm(link),
        sh.opts.max_message_size,
        peer_max,
        r.caps,
        name,
    );
    if r.caps & CAP_DESCRIPTORS != 0 {
        let peer = shmlink_arena::Peer::new(sh.opts.max_arena_bytes);
        session = session.with_peer_arena(peer, Kind::Request);
    }
    if r.caps & CAP_LENT_RESPONSES != 0 {
        session = session.with_arena(shmlink_arena::Owner::new(sh.opts.max_arena_bytes));
    }
    let process = (cred.pid > 0).then_some(ClientProcess {
        pid: cred.pid,
        uid: cred.uid,
    });
    Ok(Established {
        session,
        id,
        sock: conn,
        flags,
        peer: format!("pid {} (uid {})", cred.pid, cred.uid),
        pid: Some(cred.pid),
        uid: Some(cred.uid),
        transport: Transport::Shm,
        shm: Some(charge),
        reuse: process.map(|p| (p, memfd)),
    })
}

/// Sets up one handed-over stream session: its socket must be a
/// connected stream socket of its listener's kind whose client this
/// server's policy admits; it goes on from the bytes the server had read.
///
/// # Errors
/// Why it cannot go on here, naming the session.
fn establish_stream(
    sh: &Shared,
    r: &SessionRecord,
    address: &Address,
    fds: Vec<OwnedFd>,
    read_ahead: &[u8],
) -> std::result::Result<Established, String> {
    let id = r.id;
    let Some(fd) = fds.into_iter().next() else {
        return Err(format!("session {id} came without its socket"));
    };
    let name = address.to_string();
    let kind = shmlink_sys::net::connected_stream_kind(&fd);
    let (conn, cred, transport) =
        match (kind, address.transport()) {
            (Some(StreamKind::Tcp), Transport::Tcp) => (
                Stream::Tcp(std::net::TcpStream::from(fd)),
                None,
                Transport::Tcp,
            ),
            (Some(StreamKind::Unix), Transport::Unix | Transport::Shm) => {
                let sock = std::os::unix::net::UnixStream::from(fd);
                let cred = shmlink_sys::peer_cred(&sock)
                    .map_err(|e| format!("session {id}: reading its client's credentials: {e}"))?;
                sh.policy.check(&cred, &name)?;
                (Stream::Unix(sock), Some(cred), address.transport())
            }
            (k, t) => {
                return Err(format!(
                "session {id} of {name}: its descriptor is {}, not a connected {} stream socket",
                k.map_or("no connected stream socket".to_string(), |k| format!("a {k:?} socket")),
                if t == Transport::Tcp { "TCP" } else { "Unix" }
            ))
            }
        };
    let sock = Arc::new(conn);
    let flags = Arc::new(SessionFlags::default());
    let watch = Watch::Flags(Arc::clone(&flags));
    let mut link = StreamLink::new(Arc::clone(&sock), Some(watch), name.clone())
        .map_err(|e| format!("session {id}: {e}"))?
        .with_fds(r.caps & CAP_FDS != 0)
        .with_read_ahead(read_ahead);
    if let Some(evt) = super::admit::handover_interrupt(sh) {
        link = link.with_interrupt(evt);
    }
    let peer_max = usize::try_from(r.peer_max).unwrap_or(usize::MAX);
    let session = Session::new(
        Link::Stream(link),
        sh.opts.max_message_size,
        peer_max,
        r.caps,
        name,
    );
    let (pid, uid) = (cred.map(|c| c.pid), cred.map(|c| c.uid));
    Ok(Established {
        session,
        id,
        sock,
        flags,
        peer: match cred {
            Some(c) => format!("pid {} (uid {})", c.pid, c.uid),
            None => format!("session {id} over TCP"),
        },
        pid,
        uid,
        transport,
        shm: None,
        reuse: None,
    })
}

/// Waits (up to [`STEP`]) for the predecessor to close `conn`: it does
/// once its hand-over socket is gone, so that this server can listen on
/// the same path.
pub(crate) fn wait_closed(conn: UnixStream) {
    let mut byte = [0u8; 1];
    let _ = (&conn).read(&mut byte);
}

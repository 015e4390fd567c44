//! The server's side of the handshake, in named steps: check the peer's
//! credentials, read the hello, agree on the session, open its data path
//! and send the welcome. A step that refuses says why to the client.

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::conn::send_welcome;
use super::shared::Shared;
use crate::address::Transport;
use crate::error::RefusalCode;
use crate::handshake::{self, Hello, Welcome, Wire, HELLO_LEN};
use crate::link::shm::ShmLink;
use crate::link::stream::{Stream, StreamLink};
use crate::link::Link;
use crate::options::check_ring_size;
use crate::segment::Endpoints;
use crate::session::Session;
use crate::watch::{SessionFlags, Spinner, Watch};

/// A session whose handshake succeeded.
#[derive(Debug)]
pub(crate) struct Established {
    pub(crate) session: Session,
    pub(crate) id: u64,
    /// The socket: the control socket of a `shm:` session, the data socket otherwise.
    pub(crate) sock: Arc<Stream>,
    pub(crate) flags: Arc<SessionFlags>,
}

/// Why a handshake ended without a session: a refusal to send, or nothing
/// (the connection is gone, or the welcome could not be sent).
struct Refusal(Option<(RefusalCode, String)>);

impl Refusal {
    fn new(code: RefusalCode, message: String) -> Refusal {
        Refusal(Some((code, message)))
    }

    fn silent() -> Refusal {
        Refusal(None)
    }
}

/// What the two sides agreed on.
struct Agreed {
    version: u16,
    wire: Wire,
    hello: Hello,
}

/// Runs the handshake on `conn`; `None` when it was refused (the client
/// has been told why) or the connection ended.
pub(crate) fn establish(
    shared: &Shared,
    conn: Stream,
    transport: Transport,
    address: &str,
) -> Option<Established> {
    let result = check_credentials(shared, &conn, address)
        .and_then(|()| read_hello(shared, &conn, address))
        .and_then(|hello| agree(shared, hello, transport, address));
    let agreed = match result {
        Ok(a) => a,
        Err(r) => {
            refuse(shared, &conn, r);
            return None;
        }
    };
    let id = shared.next_session_id();
    let peer = format!("{address} session {id}");
    open(shared, conn, &agreed, id, peer)
}

fn refuse(shared: &Shared, conn: &Stream, r: Refusal) {
    if let Refusal(Some((code, message))) = r {
        shared.stats.refused.fetch_add(1, Ordering::Relaxed);
        let _ = send_welcome(conn, &Welcome::Refused { code, message }, None);
    }
}

/// `SO_PEERCRED` against the policy, before anything is read (Unix sockets;
/// TCP has no credentials to check).
fn check_credentials(shared: &Shared, conn: &Stream, address: &str) -> Result<(), Refusal> {
    let Stream::Unix(s) = conn else {
        return Ok(());
    };
    let cred = shmlink_sys::peer_cred(s).map_err(|e| {
        Refusal::new(
            RefusalCode::NotAllowed,
            format!("server at {address} cannot read peer credentials: {e}"),
        )
    })?;
    shared
        .policy
        .check(&cred, address)
        .map_err(|why| Refusal::new(RefusalCode::NotAllowed, why))
}

/// Reads and decodes the hello within the handshake timeout.
fn read_hello(shared: &Shared, conn: &Stream, address: &str) -> Result<Hello, Refusal> {
    let timeout = shared.opts.handshake_timeout;
    conn.set_timeouts(Some(timeout))
        .map_err(|_| Refusal::silent())?;
    let mut hb = [0u8; HELLO_LEN];
    if let Err(e) = conn.read_exact(&mut hb) {
        let why = match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                format!("no complete hello within {timeout:?}")
            }
            _ => format!("connection ended before a complete hello: {e}"),
        };
        return Err(Refusal::new(
            RefusalCode::BadRequest,
            format!("server at {address}: {why}"),
        ));
    }
    Hello::decode(&hb).map_err(|e| {
        Refusal::new(
            RefusalCode::BadRequest,
            format!("server at {address}: {}", e.0),
        )
    })
}

/// Agrees on the version and checks that the hello asks for what this
/// listener serves, with valid ring sizes, while the server is not stopping.
fn agree(
    shared: &Shared,
    hello: Hello,
    transport: Transport,
    address: &str,
) -> Result<Agreed, Refusal> {
    let version = handshake::negotiate_version(
        (hello.version_min, hello.version_max),
        (handshake::PROTOCOL_MIN, handshake::PROTOCOL_MAX),
    )
    .map_err(|why| Refusal::new(RefusalCode::Version, format!("server at {address}: {why}")))?;
    let wire = if transport == Transport::Shm {
        Wire::Shm
    } else {
        Wire::Stream
    };
    if hello.wire != wire {
        return Err(Refusal::new(
            RefusalCode::BadRequest,
            format!(
                "server at {address} serves {} sessions; the client asked for {:?}",
                transport.scheme(),
                hello.wire
            ),
        ));
    }
    if wire == Wire::Shm {
        for (name, n) in [
            ("ring size (client to server)", hello.ring_c2s),
            ("ring size (server to client)", hello.ring_s2c),
        ] {
            check_ring_size(name, n as usize).map_err(|e| {
                Refusal::new(RefusalCode::BadRequest, format!("server at {address}: {e}"))
            })?;
        }
    }
    if shared.stopping() {
        return Err(Refusal::new(
            RefusalCode::ShuttingDown,
            format!("server at {address} is shutting down"),
        ));
    }
    Ok(Agreed {
        version,
        wire,
        hello,
    })
}

/// The welcome of an accepted session.
fn welcome(shared: &Shared, a: &Agreed, id: u64) -> Welcome {
    Welcome::Accepted {
        version: a.version,
        caps: a.hello.caps & handshake::CAPS,
        session_id: id,
        ring_c2s: a.hello.ring_c2s,
        ring_s2c: a.hello.ring_s2c,
        max_message: shared.opts.max_message_size as u64,
    }
}

/// Opens the session's data path and sends the welcome; `None` when the
/// connection failed on the way (or was refused: no segment).
fn open(shared: &Shared, conn: Stream, a: &Agreed, id: u64, peer: String) -> Option<Established> {
    let flags = Arc::new(SessionFlags::default());
    let watch = Watch::Flags(Arc::clone(&flags));
    let (link, sock) = match a.wire {
        Wire::Shm => open_shm(shared, conn, a, id, watch, &peer)?,
        Wire::Stream => open_stream(shared, conn, a, id, watch, &peer)?,
    };
    let peer_max = usize::try_from(a.hello.max_message).unwrap_or(usize::MAX);
    Some(Established {
        session: Session::new(link, shared.opts.max_message_size, peer_max, peer),
        id,
        sock,
        flags,
    })
}

/// An `shm:` session: a segment (prepared ahead, or made now) whose memfd
/// goes with the welcome; the socket stays as the control channel.
fn open_shm(
    shared: &Shared,
    conn: Stream,
    a: &Agreed,
    id: u64,
    watch: Watch,
    peer: &str,
) -> Option<(Link, Arc<Stream>)> {
    let made = shared
        .segments
        .take(a.hello.ring_c2s as usize, a.hello.ring_s2c as usize)
        .map_err(|e| e.to_string())
        .and_then(|(seg, fd)| {
            Endpoints::new(Arc::new(seg), true)
                .map(|ends| (ends, fd))
                .map_err(|e| e.to_string())
        });
    let (ends, fd) = match made {
        Ok(x) => x,
        Err(e) => {
            let msg = format!("server at {peer} cannot create a segment: {e}");
            refuse(shared, &conn, Refusal::new(RefusalCode::ServerFailure, msg));
            return None;
        }
    };
    send_welcome(&conn, &welcome(shared, a, id), Some(fd.as_fd())).ok()?;
    let spinner = Spinner::new(shared.opts.wait);
    let link = ShmLink::new(ends, spinner, watch, peer.to_string());
    Some((Link::Shm(link), Arc::new(conn)))
}

/// A `unix:` or `tcp:` session: frames on the socket itself.
fn open_stream(
    shared: &Shared,
    conn: Stream,
    a: &Agreed,
    id: u64,
    watch: Watch,
    peer: &str,
) -> Option<(Link, Arc<Stream>)> {
    send_welcome(&conn, &welcome(shared, a, id), None).ok()?;
    let sock = Arc::new(conn);
    let link = StreamLink::new(Arc::clone(&sock), Some(watch), peer.to_string()).ok()?;
    Some((Link::Stream(link), sock))
}

//! One session on the server: credential check, handshake, then the request
//! loop on its own thread.

use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use shmlink_sys::{fdpass, futex};

use super::monitor::Shared;
use super::{Handler, CODE_HANDLER_PANICKED, CODE_RESPONSE_TOO_LARGE};
use crate::address::Transport;
use crate::deadline::Deadline;
use crate::error::{RefusalCode, RemoteError};
use crate::frame::{Kind, Message};
use crate::handshake::{self, Hello, Welcome, Wire, HELLO_LEN};
use crate::link::shm::ShmLink;
use crate::link::stream::{Stream, StreamLink};
use crate::link::Link;
use crate::options::check_ring_size;
use crate::segment::{Direction, Endpoints, Segment};

use crate::session::Session;
use crate::watch::{SessionFlags, Spinner, Watch};

/// An accepted connection.
#[derive(Debug)]
pub(crate) enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn into_stream(self) -> Stream {
        match self {
            Conn::Unix(s) => Stream::Unix(s),
            Conn::Tcp(s) => {
                // Frames are written whole (one writev); never wait for more.
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }
        }
    }
}

/// What the monitor needs to stop or wake a session.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) flags: Arc<SessionFlags>,
    wake: Wake,
}

#[derive(Debug)]
enum Wake {
    Shm(Arc<Segment>),
    Stream(Arc<Stream>),
}

impl Entry {
    fn wake(&self) {
        match &self.wake {
            Wake::Shm(seg) => {
                // Ring both bells the session thread may sleep on: the
                // increment makes a wait that read the old value return, and
                // the flag was set before it (Release), so the thread sees it.
                let inn = seg.ring_header(Direction::ClientToServer);
                inn.data_bell.fetch_add(1, Ordering::AcqRel);
                futex::wake(&inn.data_bell, u32::MAX);
                let out = seg.ring_header(Direction::ServerToClient);
                out.space_bell.fetch_add(1, Ordering::AcqRel);
                futex::wake(&out.space_bell, u32::MAX);
            }
            Wake::Stream(s) => s.shutdown_read(),
        }
    }

    /// The client's control socket hung up.
    pub(crate) fn peer_gone(&self) {
        self.flags.gone.store(true, Ordering::Release);
        self.wake();
    }

    /// The server is stopping.
    pub(crate) fn stop(&self) {
        self.flags.stop.store(true, Ordering::Release);
        self.wake();
    }
}

/// Counts a session thread as finished when dropped.
pub(crate) struct LiveGuard<'a>(pub(crate) &'a Shared);

impl Drop for LiveGuard<'_> {
    fn drop(&mut self) {
        self.0.thread_done();
    }
}

fn send_welcome(conn: &Stream, w: &Welcome, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
    let bytes = w.encode();
    match (conn, fd) {
        (Stream::Unix(s), Some(fd)) => {
            let n = fdpass::send_with_fds(s, &bytes, &[fd])?;
            conn.write_all(&bytes[n..])
        }
        _ => conn.write_all(&bytes),
    }
}

fn refuse(conn: &Stream, shared: &Shared, code: RefusalCode, message: String) {
    shared.stats.refused.fetch_add(1, Ordering::Relaxed);
    let _ = send_welcome(conn, &Welcome::Refused { code, message }, None);
}

/// Refuses a connection over the session limit (on the accept thread: the
/// refusal is small enough never to block on a fresh socket).
pub(crate) fn refuse_busy(conn: Conn, address: &str, max: usize) {
    let s = conn.into_stream();
    let _ = s.set_nonblocking(true);
    let msg = format!("server at {address} has reached its maximum of {max} sessions");
    let _ = send_welcome(
        &s,
        &Welcome::Refused {
            code: RefusalCode::TooManySessions,
            message: msg,
        },
        None,
    );
}

/// Refuses a client the server cannot take for lack of resources.
pub(crate) fn refuse_exhausted(conn: Conn, address: &str, e: &std::io::Error) {
    let s = conn.into_stream();
    let _ = s.set_nonblocking(true);
    let msg = format!("server at {address} cannot take a session now: {e}");
    let _ = send_welcome(
        &s,
        &Welcome::Refused {
            code: RefusalCode::ServerFailure,
            message: msg,
        },
        None,
    );
}

/// Runs one session to its end (handshake included).
pub(crate) fn run(
    shared: &Shared,
    conn: Conn,
    transport: Transport,
    address: String,
    handler: &dyn Handler,
) {
    if let Some(est) = establish(shared, conn.into_stream(), transport, &address) {
        serve(shared, est, handler);
    }
}

/// Whether the client's whole hello is already queued on the socket, so the
/// handshake can run without blocking (on the accept thread).
pub(crate) fn hello_queued(conn: &Conn) -> bool {
    let mut peek = [0u8; HELLO_LEN];
    let fd = match conn {
        Conn::Unix(s) => s.as_fd(),
        Conn::Tcp(s) => s.as_fd(),
    };
    matches!(shmlink_sys::net::peek(fd, &mut peek), Ok(n) if n == HELLO_LEN)
}

/// Handshake only; `None` when refused or the connection ended.
pub(crate) fn handshake(
    shared: &Shared,
    conn: Conn,
    transport: Transport,
    address: &str,
) -> Option<Established> {
    establish(shared, conn.into_stream(), transport, address)
}

/// Serves an established session until it ends, then frees it.
pub(crate) fn serve(shared: &Shared, est: Established, handler: &dyn Handler) {
    let Established {
        mut session,
        id,
        sock,
        flags,
    } = est;
    let (wake, watch_fd) = match session.link() {
        Link::Shm(l) => (Wake::Shm(Arc::clone(l.segment())), Some(sock)),
        Link::Stream(_) => (Wake::Stream(sock), None),
    };
    let entry = Arc::new(Entry { flags, wake });
    shared.register(id, Arc::clone(&entry), watch_fd.as_deref());
    shared.stats.sessions_opened.fetch_add(1, Ordering::AcqRel);
    serve_requests(shared, &mut session, handler);
    shared.unregister(id, watch_fd.as_deref());
    shared.stats.sessions_closed.fetch_add(1, Ordering::AcqRel);
}

/// A session whose handshake succeeded.
pub(crate) struct Established {
    session: Session,
    id: u64,
    /// The socket: the control socket of a `shm:` session, the data socket otherwise.
    sock: Arc<Stream>,
    flags: Arc<SessionFlags>,
}

/// Checks credentials, reads the hello, agrees on the session, sends the
/// welcome. Refusals are sent to the client; `None` means the connection ended.
fn establish(
    shared: &Shared,
    conn: Stream,
    transport: Transport,
    address: &str,
) -> Option<Established> {
    if let Stream::Unix(s) = &conn {
        let cred = match shmlink_sys::peer_cred(s) {
            Ok(c) => c,
            Err(e) => {
                refuse(
                    &conn,
                    shared,
                    RefusalCode::NotAllowed,
                    format!("server at {address} cannot read peer credentials: {e}"),
                );
                return None;
            }
        };
        if let Err(why) = shared.policy.check(&cred, address) {
            refuse(&conn, shared, RefusalCode::NotAllowed, why);
            return None;
        }
    }
    let opts = &shared.opts;
    conn.set_timeouts(Some(opts.handshake_timeout)).ok()?;
    let mut hb = [0u8; HELLO_LEN];
    if let Err(e) = conn.read_exact(&mut hb) {
        let why = match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                format!("no complete hello within {:?}", opts.handshake_timeout)
            }
            _ => format!("connection ended before a complete hello: {e}"),
        };
        refuse(
            &conn,
            shared,
            RefusalCode::BadRequest,
            format!("server at {address}: {why}"),
        );
        return None;
    }
    let hello = match Hello::decode(&hb) {
        Ok(h) => h,
        Err(e) => {
            refuse(
                &conn,
                shared,
                RefusalCode::BadRequest,
                format!("server at {address}: {}", e.0),
            );
            return None;
        }
    };
    let version = match handshake::negotiate_version(
        (hello.version_min, hello.version_max),
        (handshake::PROTOCOL_MIN, handshake::PROTOCOL_MAX),
    ) {
        Ok(v) => v,
        Err(why) => {
            refuse(
                &conn,
                shared,
                RefusalCode::Version,
                format!("server at {address}: {why}"),
            );
            return None;
        }
    };
    let want = if transport == Transport::Shm {
        Wire::Shm
    } else {
        Wire::Stream
    };
    if hello.wire != want {
        let msg = format!(
            "server at {address} serves {} sessions; the client asked for {:?}",
            transport.scheme(),
            hello.wire
        );
        refuse(&conn, shared, RefusalCode::BadRequest, msg);
        return None;
    }
    if want == Wire::Shm {
        for (name, n) in [
            ("ring size (client to server)", hello.ring_c2s),
            ("ring size (server to client)", hello.ring_s2c),
        ] {
            if let Err(e) = check_ring_size(name, n as usize) {
                refuse(
                    &conn,
                    shared,
                    RefusalCode::BadRequest,
                    format!("server at {address}: {e}"),
                );
                return None;
            }
        }
    }
    if shared.stopping.load(Ordering::Acquire) {
        refuse(
            &conn,
            shared,
            RefusalCode::ShuttingDown,
            format!("server at {address} is shutting down"),
        );
        return None;
    }
    let id = shared.next_session_id();
    let peer_max = usize::try_from(hello.max_message).unwrap_or(usize::MAX);
    let welcome = Welcome::Accepted {
        version,
        caps: hello.caps & handshake::CAPS,
        session_id: id,
        ring_c2s: hello.ring_c2s,
        ring_s2c: hello.ring_s2c,
        max_message: opts.max_message_size as u64,
    };
    let flags = Arc::new(SessionFlags::default());
    let peer = format!("{address} session {id}");
    let (link, ctrl) = if want == Wire::Shm {
        let made = shared
            .segments
            .take(hello.ring_c2s as usize, hello.ring_s2c as usize)
            .map_err(|e| e.to_string())
            .and_then(|(seg, fd)| {
                let seg = Arc::new(seg);
                Endpoints::new(Arc::clone(&seg), true)
                    .map(|ends| (ends, fd))
                    .map_err(|e| e.to_string())
            });
        let (ends, fd) = match made {
            Ok(x) => x,
            Err(e) => {
                refuse(
                    &conn,
                    shared,
                    RefusalCode::ServerFailure,
                    format!("server at {address} cannot create a segment: {e}"),
                );
                return None;
            }
        };
        send_welcome(&conn, &welcome, Some(fd.as_fd())).ok()?;
        drop(fd);
        let link = ShmLink::new(
            ends,
            Spinner::new(opts.wait),
            Watch::Flags(Arc::clone(&flags)),
            peer.clone(),
        );
        (Link::Shm(link), Arc::new(conn))
    } else {
        send_welcome(&conn, &welcome, None).ok()?;
        let sock = Arc::new(conn);
        let link = StreamLink::new(
            Arc::clone(&sock),
            Some(Watch::Flags(Arc::clone(&flags))),
            peer.clone(),
        )
        .ok()?;
        (Link::Stream(link), sock)
    };
    Some(Established {
        session: Session::new(link, opts.max_message_size, peer_max, peer),
        id,
        sock: ctrl,
        flags,
    })
}

fn serve_requests(shared: &Shared, session: &mut Session, handler: &dyn Handler) {
    let mut resp = Vec::new();
    loop {
        let Ok(m) = session.recv(&mut Deadline::Never) else {
            return;
        };
        match m.kind {
            Kind::Request => {
                if answer(shared, session, handler, m, &mut resp).is_err() {
                    return;
                }
            }
            Kind::OneWay => {
                let _ = catch_unwind(AssertUnwindSafe(|| handler.notify(&m.body)));
                session.recycle(m.body);
            }
            Kind::Goodbye => return,
            Kind::Response | Kind::Error | Kind::Descriptor => {
                session.break_with(format!("client sent a {:?} frame", m.kind));
                return;
            }
        }
    }
}

/// Runs the handler on a request and sends its response. `Err`: the session
/// is over.
#[inline(always)]
fn answer(
    shared: &Shared,
    session: &mut Session,
    handler: &dyn Handler,
    m: Message,
    resp: &mut Vec<u8>,
) -> Result<(), ()> {
    resp.clear();
    let result = match catch_unwind(AssertUnwindSafe(|| handler.handle(&m.body, resp))) {
        Ok(r) => r,
        Err(p) => Err(RemoteError::new(
            CODE_HANDLER_PANICKED,
            format!("handler panicked: {}", panic_text(&p)),
        )),
    };
    session.recycle(m.body);
    let error_body;
    let (kind, body) = match result {
        Ok(()) if resp.len() <= session.peer_max() => (Kind::Response, &resp[..]),
        r => {
            let e = r
                .err()
                .unwrap_or_else(|| too_large(resp.len(), session.peer_max()));
            shared.stats.errors.fetch_add(1, Ordering::Relaxed);
            error_body = Message::error_body(&e);
            (Kind::Error, &error_body[..])
        }
    };
    // Counted before the response goes out: a client that saw it may read
    // the statistics at once.
    shared.stats.calls.fetch_add(1, Ordering::Relaxed);
    let mut deadline = Deadline::In(shared.opts.send_timeout);
    session.send(kind, m.id, body, &mut deadline).map_err(drop)
}

#[cold]
fn too_large(len: usize, max: usize) -> RemoteError {
    RemoteError::new(
        CODE_RESPONSE_TOO_LARGE,
        format!("response of {len} bytes exceeds the client's maximum message size of {max} bytes"),
    )
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

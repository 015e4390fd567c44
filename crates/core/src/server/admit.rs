//! The server's side of the handshake, in named steps: check the peer's
//! credentials, read the hello, agree on the session, open its data path
//! and send the welcome. A step that refuses says why to the client.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use shmlink_sys::eventfd::EventFd;
use std::time::{Duration, Instant};

use super::conn::{send_welcome, HelloBuf};
use super::inspect;
use super::reuse::ClientProcess;
use super::shared::{Mode, Shared, ShmCharge};
use crate::address::Transport;
use crate::error::RefusalCode;
use crate::link::shm::ShmLink;
use crate::link::stream::{Patience, Stream, StreamLink};
use crate::link::Link;
use crate::options::check_ring_size;
use crate::segment::Endpoints;
use crate::session::Session;
use crate::watch::{SessionFlags, Spinner, Watch};
use shmlink_wire::frame::{Kind, MIN_MESSAGE_LIMIT};
use shmlink_wire::handshake::{self, Hello, Welcome, Wire};
use shmlink_wire::layout::SegmentHeader;

/// A session whose handshake succeeded.
#[derive(Debug)]
pub(crate) struct Established {
    pub(crate) session: Session,
    pub(crate) id: u64,
    /// The socket: the control socket of a `shm:` session, the data socket otherwise.
    pub(crate) sock: Arc<Stream>,
    pub(crate) flags: Arc<SessionFlags>,
    /// Who the client is, for logs: its pid (Unix sockets) or address (TCP).
    pub(crate) peer: String,
    /// The client's pid and uid (Unix sockets).
    pub(crate) pid: Option<i32>,
    pub(crate) uid: Option<u32>,
    /// The listener's transport.
    pub(crate) transport: Transport,
    /// The shared memory the session holds, counted until it ends.
    pub(crate) shm: Option<ShmCharge>,
    /// The segment's memfd, and the process it may be given back to when
    /// the session ends cleanly (`shm:` sessions whose client's pid is known).
    pub(crate) reuse: Option<(ClientProcess, OwnedFd)>,
}

/// Who connected: for logs, and the process when the socket tells it.
struct Peer {
    who: String,
    process: Option<ClientProcess>,
    /// Its uid (Unix sockets).
    uid: Option<u32>,
}

/// Why a handshake step refused the client, as the welcome will say.
struct Refusal {
    code: RefusalCode,
    message: String,
}

impl Refusal {
    fn new(code: RefusalCode, message: String) -> Refusal {
        Refusal { code, message }
    }
}

/// What a hello asks for: a session, or an inspection (capability bit 8,
/// with the peer's uid when the socket tells it).
enum Asked {
    Session(Agreed),
    Inspection(Hello, Option<u32>),
}

/// What the two sides agreed on, and how the rest of the handshake waits
/// (the welcome goes out under the same deadline).
struct Agreed {
    version: u16,
    transport: Transport,
    wire: Wire,
    hello: Hello,
    patience: Patience,
}

/// Runs the handshake on `conn` (non-blocking, with what has arrived of the
/// hello in `hello`); `None` when it was refused (the client has been told
/// why) or the connection ended. The whole handshake, from the connection's
/// acceptance to the welcome sent, must end by `deadline` (accepted +
/// `handshake_timeout`): a client dripping its hello a byte at a time is cut
/// off there, not after each byte.
pub(crate) fn establish(
    shared: &Shared,
    conn: Stream,
    hello: HelloBuf,
    transport: Transport,
    address: &str,
    deadline: Instant,
) -> Option<Established> {
    // The server sleeps while it waits: its session threads share CPUs with
    // the sessions they serve.
    let patience = Patience::new(deadline, Duration::ZERO);
    let result = check_credentials(shared, &conn, address).and_then(|peer| {
        let hello = read_hello(shared, &conn, hello, address, &patience)?;
        if hello.caps & handshake::CAP_INSPECT != 0 {
            let uid = peer.uid;
            return Ok((peer, Asked::Inspection(hello, uid)));
        }
        Ok((
            peer,
            Asked::Session(agree(shared, hello, transport, address, patience)?),
        ))
    });
    let (peer, agreed) = match result {
        Ok((peer, Asked::Session(agreed))) => (peer, agreed),
        Ok((_, Asked::Inspection(hello, uid))) => {
            match inspect::admit(shared, &(hello, uid, transport), address) {
                Ok(w) => inspect::answer(shared, &conn, &w, &patience),
                Err((code, message)) => refuse(shared, &conn, Refusal { code, message }, &patience),
            }
            return None;
        }
        Err(r) => {
            refuse(shared, &conn, r, &patience);
            return None;
        }
    };
    let id = shared.next_session_id();
    let session_name = format!("{address} session {id}");
    open(shared, conn, &agreed, id, session_name, peer)
}

fn refuse(shared: &Shared, conn: &Stream, r: Refusal, patience: &Patience) {
    shared.stats.refused.fetch_add(1, Ordering::Relaxed);
    let refusal = Welcome::Refused {
        code: r.code,
        message: r.message,
    };
    let _ = send_welcome(conn, &refusal, None, patience);
}

/// `SO_PEERCRED` against the policy, before the hello is decoded (Unix
/// sockets; TCP has no credentials to check).
fn check_credentials(shared: &Shared, conn: &Stream, address: &str) -> Result<Peer, Refusal> {
    let s = match conn {
        Stream::Unix(s) => s,
        Stream::Tcp(s) => {
            let who = s
                .peer_addr()
                .map_or_else(|_| "a TCP client".into(), |a| format!("TCP client {a}"));
            return Ok(Peer {
                who,
                process: None,
                uid: None,
            });
        }
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
        .map_err(|why| Refusal::new(RefusalCode::NotAllowed, why))?;
    Ok(Peer {
        who: format!("pid {} (uid {})", cred.pid, cred.uid),
        // Pid 0: the client lives in a pid namespace this server cannot see.
        process: (cred.pid > 0).then_some(ClientProcess {
            pid: cred.pid,
            uid: cred.uid,
        }),
        uid: Some(cred.uid),
    })
}

/// Reads the rest of the hello and decodes it, by the handshake's deadline.
fn read_hello(
    shared: &Shared,
    conn: &Stream,
    mut hello: HelloBuf,
    address: &str,
    patience: &Patience,
) -> Result<Hello, Refusal> {
    if let Err(e) = hello.read_rest(conn, patience) {
        let why = match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
                "no complete hello within the handshake timeout of {:?}",
                shared.opts.handshake_timeout
            ),
            _ => format!("connection ended before a complete hello: {e}"),
        };
        return Err(Refusal::new(
            RefusalCode::BadRequest,
            format!("server at {address}: {why}"),
        ));
    }
    Hello::decode(&hello.bytes).map_err(|e| {
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
    patience: Patience,
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
    let worker = hello.caps & handshake::CAP_SERVE != 0;
    match shared.mode {
        Mode::Serve | Mode::Peers if worker => {
            return Err(Refusal::new(
                RefusalCode::BadRequest,
                format!("server at {address} serves calls; workers connect to a worker port"),
            ))
        }
        Mode::TakeWorkers if !worker => {
            return Err(Refusal::new(
                RefusalCode::BadRequest,
                format!(
                    "worker port at {address} takes workers only (capability bit 3); \
                     clients call the supervisor's listen addresses"
                ),
            ))
        }
        _ => {}
    }
    if hello.max_message < MIN_MESSAGE_LIMIT as u64 {
        return Err(Refusal::new(
            RefusalCode::BadRequest,
            format!(
                "server at {address}: the hello announces a largest message of {} bytes, below the minimum of {MIN_MESSAGE_LIMIT}",
                hello.max_message
            ),
        ));
    }
    if shared.stopping() {
        return Err(Refusal::new(
            RefusalCode::ShuttingDown,
            format!("server at {address} is shutting down"),
        ));
    }
    Ok(Agreed {
        version,
        transport,
        wire,
        hello,
        patience,
    })
}

/// The capabilities of a session: those both sides offer (a worker port
/// also agrees that the connecting side serves; a server, that an `shm:`
/// session may continue over its socket).
fn agreed_caps(shared: &Shared, hello: &Hello, conn: &Stream) -> u64 {
    let ours = match shared.mode {
        // The arena's segments travel as descriptors: bit 2 needs bit 4.
        Mode::Serve if shared.opts.accept_fds && matches!(conn, Stream::Unix(_)) => {
            let arena = if shared.opts.max_arena_bytes > 0 {
                handshake::CAP_DESCRIPTORS | handshake::CAP_LENT_RESPONSES
            } else {
                0
            };
            handshake::CAPS | handshake::CAP_FDS | handshake::CAP_STREAM_FALLBACK | arena
        }
        Mode::Serve => handshake::CAPS | handshake::CAP_STREAM_FALLBACK,
        Mode::TakeWorkers => handshake::CAPS | handshake::CAP_SERVE,
        // Both sides call; descriptors go with calls either way. Arenas
        // keep their roles (a client lends requests, a server responses)
        // and are not offered here yet: calls the listener's side makes
        // travel by value (docs/protocol.md, capability bit 10).
        Mode::Peers if matches!(conn, Stream::Unix(_)) && shared.opts.accept_fds => {
            handshake::CAPS | handshake::CAP_BOTH_WAYS | handshake::CAP_FDS
        }
        Mode::Peers => handshake::CAPS | handshake::CAP_BOTH_WAYS,
    };
    // Direct lines: between `shm:` sessions only (a line is a segment), with
    // a server that lends workers (the pool) or a worker port.
    let lines = match shared.mode {
        Mode::Serve => shared.opts.lines,
        Mode::TakeWorkers => true,
        Mode::Peers => false,
    };
    let shm = hello.wire == Wire::Shm && matches!(conn, Stream::Unix(_));
    let lines = if lines && shm {
        handshake::CAP_LINES
    } else {
        0
    };
    // Loop wake-ups: a caller's `shm:` session may hand us a bell.
    let bell = if shm && shared.mode != Mode::TakeWorkers {
        handshake::CAP_BELL
    } else {
        0
    };
    hello.caps & (ours | lines | bell)
}

/// The welcome of an accepted session, naming ring sizes `rings`.
fn welcome(shared: &Shared, a: &Agreed, id: u64, caps: u64, rings: (u32, u32)) -> Welcome {
    Welcome::Accepted {
        version: a.version,
        caps,
        session_id: id,
        ring_c2s: rings.0,
        ring_s2c: rings.1,
        max_message: shared.opts.max_message_size as u64,
    }
}

/// Opens the session's data path and sends the welcome; `None` when the
/// connection failed on the way (or was refused: no segment).
fn open(
    shared: &Shared,
    conn: Stream,
    a: &Agreed,
    id: u64,
    name: String,
    peer: Peer,
) -> Option<Established> {
    let flags = Arc::new(SessionFlags::default());
    // A server's sessions are watched by its monitor (flags it sets); the
    // owner of a worker port polls each worker's control socket itself,
    // as a client does.
    let watch = match (shared.mode, &conn) {
        (Mode::Serve, _) | (_, Stream::Tcp(_)) => Some(Watch::Flags(Arc::clone(&flags))),
        (Mode::TakeWorkers | Mode::Peers, Stream::Unix(s)) => s.try_clone().ok().map(Watch::Socket),
    };
    let mut caps = agreed_caps(shared, &a.hello, &conn);
    let rings = (a.hello.ring_c2s, a.hello.ring_s2c);
    let mut shm = None;
    let mut reuse = None;
    let (link, sock) = match a.wire {
        Wire::Shm => match make_segment(shared, a, peer.process) {
            Ok((ends, fd, charge)) => {
                shm = Some(charge);
                let link = open_shm(shared, conn, a, (id, caps), watch?, &name, (ends, &fd))?;
                reuse = peer
                    .process
                    .filter(|_| shared.may_keep_memfd())
                    .map(|p| (p, fd));
                link
            }
            Err(why) if caps & handshake::CAP_STREAM_FALLBACK != 0 => {
                shared.opts.log.write(&format!(
                    "shmlink: server at {name}: session {id} with {} continues over its socket: {why}",
                    peer.who
                ));
                // An arena is shared memory too: a server that could not
                // make a segment does not offer one (the client's segments
                // would not map here either; ours could not be made).
                if let NoSegment::Failed(_) = why {
                    caps &= !(handshake::CAP_DESCRIPTORS | handshake::CAP_LENT_RESPONSES);
                }
                // A line is shared memory between `shm:` sessions' ends.
                // So is a bell: the socket itself tells a loop of data.
                caps &= !(handshake::CAP_LINES | handshake::CAP_BELL);
                open_stream(shared, conn, a, (id, caps), watch, &name, (0, 0))?
            }
            Err(why) => {
                let msg = format!("server at {name} cannot give this session shared memory: {why}");
                let r = Refusal::new(RefusalCode::ServerFailure, msg);
                refuse(shared, &conn, r, &a.patience);
                return None;
            }
        },
        Wire::Stream => open_stream(shared, conn, a, (id, caps), watch, &name, rings)?,
    };
    let peer_max = usize::try_from(a.hello.max_message).unwrap_or(usize::MAX);
    let mut session = Session::new(link, shared.opts.max_message_size, peer_max, caps, name);
    if caps & handshake::CAP_DESCRIPTORS != 0 {
        let peer = shmlink_arena::Peer::new(shared.opts.max_arena_bytes);
        session = session.with_peer_arena(peer, Kind::Request);
    }
    if caps & handshake::CAP_LENT_RESPONSES != 0 {
        session = session.with_arena(shmlink_arena::Owner::new(shared.opts.max_arena_bytes));
    }
    Some(Established {
        // The port's side of a worker session makes the calls, and drains
        // answers while it waits to send, as a client does.
        session: match shared.mode {
            Mode::Serve => session,
            Mode::TakeWorkers | Mode::Peers => session.drain_while_sending(),
        },
        id,
        sock,
        flags,
        peer: peer.who,
        pid: peer.process.map(|p| p.pid),
        uid: peer.uid,
        transport: a.transport,
        shm,
        reuse,
    })
}

/// The segment of an `shm:` session (the one this client process left,
/// prepared ahead, or made now), counted against `max_shm_bytes`; `Err`
/// says why there is none.
fn make_segment(
    shared: &Shared,
    a: &Agreed,
    process: Option<ClientProcess>,
) -> Result<(Endpoints, OwnedFd, ShmCharge), NoSegment> {
    let (c2s, s2c) = (a.hello.ring_c2s as usize, a.hello.ring_s2c as usize);
    let kept = process.and_then(|p| shared.reusable.take(p, c2s, s2c));
    let (seg, fd, charge) = match kept {
        Some(k) => k,
        None => {
            let bytes = SegmentHeader::for_rings(c2s, s2c).total_len;
            // Segments kept for other processes give way to a new session.
            let charge = shared
                .charge_shm(bytes)
                .or_else(|why| {
                    if shared.reusable.clear() {
                        shared.charge_shm(bytes)
                    } else {
                        Err(why)
                    }
                })
                .map_err(NoSegment::Limit)?;
            let (seg, fd) = shared
                .segments
                .take(c2s, s2c)
                .map_err(|e| NoSegment::Failed(format!("it cannot create a segment: {e}")))?;
            (seg, fd, charge)
        }
    };
    let ends = Endpoints::new(Arc::new(seg), true).map_err(|e| NoSegment::Failed(e.to_string()))?;
    Ok((ends, fd, charge))
}

/// Why an `shm:` session has no segment.
#[derive(Debug)]
enum NoSegment {
    /// `max_shm_bytes` is reached.
    Limit(String),
    /// The kernel refused the memfd, its size, seals or mapping.
    Failed(String),
}

impl std::fmt::Display for NoSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoSegment::Limit(why) | NoSegment::Failed(why) => f.write_str(why),
        }
    }
}

/// An `shm:` session: a segment (prepared ahead, or made now) whose memfd
/// goes with the welcome; the socket stays as the control channel (and
/// carries the descriptors sent with messages, when agreed).
fn open_shm(
    shared: &Shared,
    conn: Stream,
    a: &Agreed,
    (id, caps): (u64, u64),
    watch: Watch,
    peer: &str,
    (ends, fd): (Endpoints, &OwnedFd),
) -> Option<(Link, Arc<Stream>)> {
    let rings = (a.hello.ring_c2s, a.hello.ring_s2c);
    send_welcome(
        &conn,
        &welcome(shared, a, id, caps, rings),
        Some(fd.as_fd()),
        &a.patience,
    )
    .ok()?;
    let spinner = Spinner::new(shared.opts.wait);
    let conn = Arc::new(conn);
    // Line grants travel as descriptors too (to callers and to workers).
    let fds = (caps & handshake::CONTROL_FDS != 0).then(|| Arc::clone(&conn));
    let link = ShmLink::new(ends, spinner, watch, peer.to_string()).with_fds(fds);
    Some((Link::Shm(link), conn))
}

/// A `unix:` or `tcp:` session, or an `shm:` session that continues over
/// its socket (`rings` 0/0 in the welcome): frames on the socket itself.
fn open_stream(
    shared: &Shared,
    conn: Stream,
    a: &Agreed,
    (id, caps): (u64, u64),
    watch: Option<Watch>,
    peer: &str,
    rings: (u32, u32),
) -> Option<(Link, Arc<Stream>)> {
    send_welcome(
        &conn,
        &welcome(shared, a, id, caps, rings),
        None,
        &a.patience,
    )
    .ok()?;
    let sock = Arc::new(conn);
    // A worker port's stream session is a client-like link: no flags.
    let watch = watch.filter(|_| shared.mode == Mode::Serve);
    let mut link = StreamLink::new(Arc::clone(&sock), watch, peer.to_string())
        .ok()?
        .with_fds(caps & handshake::CAP_FDS != 0);
    if let Some(evt) = handover_interrupt(shared) {
        link = link.with_interrupt(evt);
    }
    Some((Link::Stream(link), sock))
}

/// The interrupt a stream session of a server that may hand over waits
/// on beside its socket (`None` for other servers, or out of descriptors:
/// that session is then not handed, it ends as at a stop).
pub(super) fn handover_interrupt(shared: &Shared) -> Option<Arc<EventFd>> {
    if shared.mode != Mode::Serve || shared.opts.handover.is_none() {
        return None;
    }
    EventFd::new().ok().map(Arc::new)
}

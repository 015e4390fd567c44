//! The client side of the handshake.

use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink_sys::poll::{control_state, ControlState};

use crate::address::Address;
use crate::error::{Error, Result};
use crate::kept;
use crate::link::shm::ShmLink;
use crate::link::stream::{Patience, Stream, StreamLink};
use crate::link::Link;
use crate::options::{ClientOptions, WaitStrategy};
use crate::segment::Endpoints;
use crate::session::Session;
use crate::watch::{Spinner, Watch};
use shmlink_wire::frame::{Kind, MIN_MESSAGE_LIMIT};
use shmlink_wire::handshake::{self, Hello, Welcome, Wire, WELCOME_LEN};

/// Which side of the calls the connecting side takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A client: it makes the calls.
    Caller,
    /// A worker: it answers the calls of the server it connects to.
    Worker,
}

/// What the welcome settled: ring sizes (0/0 when an `shm:` session goes
/// on over its socket), the server's largest message and the capabilities
/// both sides use.
struct Agreed {
    ring_c2s: usize,
    ring_s2c: usize,
    server_max: usize,
    caps: u64,
}

/// Connects to `address` and returns an established session, in the steps
/// the server takes on its side (`server/admit.rs`): the hello, the socket,
/// the hello sent, the welcome read and checked, the link opened, the
/// session started. One deadline for the whole handshake: each read or
/// write waits only for what is left of `opts.timeout`.
pub(crate) fn connect(address: &Address, opts: &ClientOptions, role: Role) -> Result<Session> {
    let deadline = Instant::now() + opts.timeout;
    let name = address.to_string();
    let hello = hello_for(address, opts, role);
    let stream = open_socket(address, deadline)?;
    let patience = Patience::new(deadline, welcome_spin(opts.wait, opts.timeout));
    send_hello(&stream, &hello, &name, opts.timeout, &patience)?;
    let (welcome, fds) = read_welcome(&stream, &name, opts.timeout, &patience)?;
    let agreed = check_welcome(welcome, &hello, role, &name)?;
    let link = open_link(stream, fds, &agreed, opts, &name)?;
    Ok(start_session(link, &agreed, opts, role, name))
}

/// The capabilities a side offers: by role, transport and options.
fn offered_caps(address: &Address, opts: &ClientOptions, role: Role) -> u64 {
    let by_role = match (role, address) {
        (Role::Caller, Address::Tcp(_)) => handshake::CAPS | handshake::CAP_BOTH_WAYS,
        (Role::Caller, _) if opts.max_arena_bytes > 0 => {
            handshake::CAPS
                | handshake::CAP_BOTH_WAYS
                | handshake::CAP_FDS
                | handshake::CAP_DESCRIPTORS
                | handshake::CAP_LENT_RESPONSES
        }
        (Role::Caller, _) => handshake::CAPS | handshake::CAP_BOTH_WAYS | handshake::CAP_FDS,
        (Role::Worker, _) => handshake::CAPS | handshake::CAP_SERVE,
    };
    let by_shm = match (role, address) {
        (Role::Caller, Address::Shm(_)) if !opts.shm_required => {
            handshake::CAP_STREAM_FALLBACK | handshake::CAP_LINES | handshake::CAP_BELL
        }
        (Role::Caller, Address::Shm(_)) => handshake::CAP_LINES | handshake::CAP_BELL,
        (_, Address::Shm(_)) => handshake::CAP_LINES,
        _ => 0,
    };
    by_role | by_shm
}

/// The hello this client sends. Ring sizes mean something only to `shm:`
/// sessions; a stream hello carries 0 there.
fn hello_for(address: &Address, opts: &ClientOptions, role: Role) -> Hello {
    let (wire, ring) = match address {
        Address::Shm(_) => (Wire::Shm, opts.ring_size as u32),
        _ => (Wire::Stream, 0),
    };
    Hello {
        version_min: handshake::PROTOCOL_MIN,
        version_max: handshake::PROTOCOL_MAX,
        wire,
        caps: offered_caps(address, opts, role),
        ring_c2s: ring,
        ring_s2c: ring,
        max_message: opts.max_message_size as u64,
    }
}

/// Sends the hello (the socket is non-blocking from here on, as the data
/// path needs it). A server may refuse (credentials, session limit) before
/// reading the hello and close at once: the write then fails with EPIPE or
/// ECONNRESET, but its refusal is already queued for us: that is reported.
fn send_hello(
    stream: &Stream,
    hello: &Hello,
    name: &str,
    timeout: Duration,
    patience: &Patience,
) -> Result<()> {
    let sent = stream
        .set_nonblocking(true)
        .and_then(|()| stream.write_all_by(&hello.encode(), patience));
    let Err(e) = sent else {
        return Ok(());
    };
    if matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    ) {
        if let Ok((Welcome::Refused { code, message }, _)) =
            read_welcome(stream, name, timeout, patience)
        {
            return Err(Error::Refused {
                address: name.to_string(),
                code,
                message,
            });
        }
    }
    Err(handshake_io(name, "handshake (sending hello)", timeout, e))
}

/// Checks the server's welcome against the hello: a refusal, a version or
/// capability this client did not offer, an arena without descriptors, a
/// worker the server does not take, ring sizes not asked for, a largest
/// message below the minimum are errors.
fn check_welcome(welcome: Welcome, hello: &Hello, role: Role, name: &str) -> Result<Agreed> {
    let (version, caps, ring_c2s, ring_s2c, max_message) = match welcome {
        Welcome::Refused { code, message } => {
            return Err(Error::Refused {
                address: name.to_string(),
                code,
                message,
            })
        }
        Welcome::Accepted {
            version,
            caps,
            ring_c2s,
            ring_s2c,
            max_message,
            ..
        } => (version, caps, ring_c2s, ring_s2c, max_message),
    };
    let proto = |detail: String| Error::Protocol {
        peer: name.to_string(),
        detail,
    };
    if !(handshake::PROTOCOL_MIN..=handshake::PROTOCOL_MAX).contains(&version) {
        return Err(proto(format!(
            "server chose protocol version {version}, which this client does not speak"
        )));
    }
    if caps & !hello.caps != 0 {
        return Err(proto(format!(
            "server enabled capabilities {caps:#x} this client did not offer"
        )));
    }
    let arenas = handshake::CAP_DESCRIPTORS | handshake::CAP_LENT_RESPONSES;
    if caps & arenas != 0 && caps & handshake::CAP_FDS == 0 {
        return Err(proto(
            "server agreed to an arena (capability bit 2 or 5) without descriptors (bit 4), which its segments need".into(),
        ));
    }
    if role == Role::Worker && caps & handshake::CAP_SERVE == 0 {
        return Err(proto(
            "the server does not take workers (it did not agree to capability bit 3)".into(),
        ));
    }
    let shm = hello.wire == Wire::Shm;
    let fell_back =
        shm && caps & handshake::CAP_STREAM_FALLBACK != 0 && ring_c2s == 0 && ring_s2c == 0;
    if shm && !fell_back && (ring_c2s != hello.ring_c2s || ring_s2c != hello.ring_s2c) {
        return Err(proto(format!(
            "server chose ring sizes {ring_c2s}/{ring_s2c}, client asked for {}",
            hello.ring_c2s
        )));
    }
    if max_message < MIN_MESSAGE_LIMIT as u64 {
        return Err(proto(format!(
            "server announced a largest message of {max_message} bytes, below the minimum of {MIN_MESSAGE_LIMIT}"
        )));
    }
    // A stream session has no rings, whatever a welcome says there.
    let rings = if shm { (ring_c2s, ring_s2c) } else { (0, 0) };
    Ok(Agreed {
        ring_c2s: rings.0 as usize,
        ring_s2c: rings.1 as usize,
        server_max: usize::try_from(max_message).unwrap_or(usize::MAX),
        caps,
    })
}

/// Opens the data path the welcome agreed to: the rings of the segment it
/// carried (ring sizes 0/0 for an `shm:` hello: the server could give no
/// shared memory, and the session goes on over the socket, bit 6), or the
/// socket itself.
fn open_link(
    stream: Stream,
    fds: Vec<OwnedFd>,
    agreed: &Agreed,
    opts: &ClientOptions,
    name: &str,
) -> Result<Link> {
    let proto = |detail: String| Error::Protocol {
        peer: name.to_string(),
        detail,
    };
    match stream {
        Stream::Unix(ctrl) if agreed.ring_c2s != 0 => {
            // With descriptors (or line grants) agreed, the server may
            // write a descriptor record right behind the welcome (a
            // supervisor granting its new worker a line at once); any other
            // bytes there are a protocol error.
            let records = agreed.caps & handshake::CONTROL_FDS != 0;
            if control_state(&ctrl) == ControlState::Bytes && !(records && record_next(&ctrl)) {
                return Err(proto(
                    "bytes on the control socket after the welcome (it carries nothing then)"
                        .into(),
                ));
            }
            let [fd]: [OwnedFd; 1] = fds.try_into().map_err(|v: Vec<OwnedFd>| {
                proto(format!(
                    "welcome carried {} descriptors, expected 1 segment",
                    v.len()
                ))
            })?;
            // A mapping kept from an earlier session of ours when the server
            // gave us that segment again, else a fresh one.
            let segment = kept::open(&fd, agreed.ring_c2s, agreed.ring_s2c).map_err(proto)?;
            let ends = Endpoints::new(segment, false).map_err(|e| proto(e.to_string()))?;
            // Descriptors sent with messages (and line grants) travel on the
            // control socket, which the watch then shares.
            let (watch, fd_channel) = if agreed.caps & handshake::CONTROL_FDS != 0 {
                let ctrl = Arc::new(Stream::Unix(ctrl));
                (Watch::FdSocket(Arc::clone(&ctrl) as _), Some(ctrl))
            } else {
                (Watch::Socket(ctrl), None)
            };
            Ok(Link::Shm(
                ShmLink::new(ends, Spinner::new(opts.wait), watch, name.to_string())
                    .with_fds(fd_channel),
            ))
        }
        stream => {
            if !fds.is_empty() {
                return Err(proto("unexpected descriptors in welcome".into()));
            }
            Ok(Link::Stream(
                StreamLink::new(Arc::new(stream), None, name.to_string())?
                    .with_fds(agreed.caps & handshake::CAP_FDS != 0),
            ))
        }
    }
}

/// The session over `link`, with the arenas agreed. A caller drains
/// responses while it waits to send requests (the server may be blocked
/// writing to it); a worker sends one answer at a time.
fn start_session(
    link: Link,
    agreed: &Agreed,
    opts: &ClientOptions,
    role: Role,
    name: String,
) -> Session {
    let mut session = Session::new(
        link,
        opts.max_message_size,
        agreed.server_max,
        agreed.caps,
        name,
    );
    if agreed.caps & handshake::CAP_DESCRIPTORS != 0 {
        session = session.with_arena(shmlink_arena::Owner::new(opts.max_arena_bytes));
    }
    if agreed.caps & handshake::CAP_LENT_RESPONSES != 0 {
        let peer = shmlink_arena::Peer::new(opts.max_arena_bytes);
        session = session.with_peer_arena(peer, Kind::Response);
    }
    match role {
        Role::Caller => session.drain_while_sending(),
        Role::Worker => session,
    }
}

/// Connects the socket of `address` (TCP by `deadline`).
///
/// # Errors
/// [`Error::Connect`].
pub(crate) fn open_socket(address: &Address, deadline: Instant) -> Result<Stream> {
    let conn_err = |source: io::Error| Error::Connect {
        address: address.to_string(),
        source,
    };
    Ok(match address {
        Address::Shm(p) | Address::Unix(p) => {
            Stream::Unix(UnixStream::connect(p).map_err(conn_err)?)
        }
        Address::Tcp(hp) => Stream::Tcp(connect_tcp(hp, deadline).map_err(conn_err)?),
    })
}

fn connect_tcp(hostport: &str, deadline: Instant) -> io::Result<TcpStream> {
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{hostport} resolves to no address"),
    );
    for sa in hostport.to_socket_addrs()? {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"));
        }
        match TcpStream::connect_timeout(&sa, left) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

pub(crate) fn handshake_io(
    address: &str,
    what: &'static str,
    timeout: Duration,
    e: io::Error,
) -> Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout {
            address: address.to_string(),
            op: what,
            after: timeout,
        },
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe => Error::PeerGone {
            address: address.to_string(),
            detail: format!("connection closed while {what}"),
        },
        _ => Error::io(format!("handshake with {address} ({what})"), e),
    }
}

/// How long a client spins for its welcome before sleeping in `poll`, as it
/// would for a response: the welcome needs the server to wake up and run
/// the handshake, tens of µs on a VM, and a client CPU gone idle meanwhile
/// costs as much again to wake. `sleep` never spins; `spin` spins its
/// bound; `busy` spins to the deadline.
fn welcome_spin(wait: WaitStrategy, timeout: Duration) -> Duration {
    match wait {
        WaitStrategy::Sleep => Duration::ZERO,
        WaitStrategy::Spin(d) => d,
        WaitStrategy::Busy => timeout,
    }
}

/// Reads the welcome (and the descriptors that come with it).
pub(crate) fn read_welcome(
    stream: &Stream,
    name: &str,
    timeout: Duration,
    patience: &Patience,
) -> Result<(Welcome, Vec<OwnedFd>)> {
    let mut buf = [0u8; WELCOME_LEN + handshake::MAX_REFUSAL_TEXT];
    let mut have = 0;
    let mut fds = Vec::new();
    let reading = |e| handshake_io(name, "handshake (reading the welcome)", timeout, e);
    while have < WELCOME_LEN {
        let got = match stream {
            // Exactly the welcome: frames may follow it on the socket (a
            // worker port calls first).
            Stream::Unix(s) => {
                shmlink_sys::fdpass::recv_fds_into(s, &mut buf[have..WELCOME_LEN], &mut fds, true)
            }
            Stream::Tcp(_) => stream.read_some(&mut buf[have..WELCOME_LEN]),
        };
        let n = match got {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                patience.wait(stream, false).map_err(reading)?;
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(reading(e)),
        };
        if n == 0 {
            return Err(Error::PeerGone {
                address: name.to_string(),
                detail: "connection closed during handshake".into(),
            });
        }
        have += n;
    }
    let (fixed, text_len) =
        Welcome::decode_fixed(&buf[..WELCOME_LEN]).map_err(|e| Error::Protocol {
            peer: name.to_string(),
            detail: e.0,
        })?;
    let end = WELCOME_LEN + text_len;
    stream
        .read_exact_by(&mut buf[WELCOME_LEN..end], patience)
        .map_err(|e| handshake_io(name, "handshake (reading the refusal)", timeout, e))?;
    Ok((fixed.with_text(&buf[WELCOME_LEN..end]), fds))
}

/// Whether the bytes waiting on a control socket start a descriptor record.
fn record_next(ctrl: &std::os::unix::net::UnixStream) -> bool {
    let mut magic = [0u8; 4];
    matches!(shmlink_sys::net::peek(ctrl, &mut magic), Ok(4))
        && magic == shmlink_wire::fd_record::FD_RECORD_MAGIC
}

//! The session rules of docs/protocol.md, over every transport: a peer that
//! breaks one is told why (a `Goodbye` with `CODE_PROTOCOL_ERROR` and a
//! reason) before the session ends, and the server logs it with the session
//! id and the client; capabilities bind; the handshake has one deadline; a
//! largest message below the minimum is refused; a client that stops reading
//! loses its session after `send_timeout`; a stopping server says goodbye.
//!
//! The misbehaving clients are written by hand (`support::raw`): the
//! handshake from the protocol description, frames on the socket or, for
//! `shm:`, through the ring crate over the mapped segment.

mod support;

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use shmlink::wire::{FrameHeader, Hello, Kind, Welcome, CAP_CHUNKED, CAP_ONE_WAY, HEADER_LEN};
use shmlink::{
    Client, ClientOptions, Error, Log, RefusalCode, RemoteError, ServerOptions,
    CODE_RESPONSE_TOO_LARGE, CODE_SHUTTING_DOWN, MIN_MESSAGE_LIMIT,
};
use support::raw::*;
use support::*;

fn echo(req: &[u8], resp: &mut Vec<u8>) -> Result<(), RemoteError> {
    // "len:N" asks for N bytes; anything else is echoed.
    match std::str::from_utf8(req)
        .ok()
        .and_then(|s| s.strip_prefix("len:"))
        .and_then(|n| n.parse().ok())
    {
        Some(n) => resp.resize(n, 7),
        None => resp.extend_from_slice(req),
    }
    Ok(())
}

fn logged_server(t: T, lines: &Lines) -> Srv {
    start(
        t,
        ServerOptions {
            log: lines.log(),
            ..Default::default()
        },
        echo,
    )
}

/// Who the server's log names as the client.
fn client_named(t: T) -> &'static str {
    if t == T::Tcp {
        "TCP client 127.0.0.1:"
    } else {
        "(uid "
    }
}

// ---------- the rules, per transport ----------

crate::per_transport!(
    broken_rules_are_told_and_logged,
    chunks_need_the_capability,
    one_way_needs_the_capability,
    a_small_limit_is_refused_and_error_replies_fit,
    the_handshake_has_one_deadline,
    a_client_that_stops_reading_loses_its_session,
    a_stopping_server_says_goodbye,
);

/// Every broken rule: the client gets a goodbye saying which, the server
/// ends the session and logs it with the session id and the client.
fn broken_rules_are_told_and_logged(t: T) {
    let lines = Lines::default();
    let srv = logged_server(t, &lines);
    let cases: [(&str, [u8; HEADER_LEN], &[u8], &str); 9] = [
        (
            "a response sent to the server",
            raw_header(Kind::Response as u8, 0, 1, 2, 2),
            b"ok",
            "only requests",
        ),
        (
            "a descriptor frame",
            raw_header(Kind::Descriptor as u8, 0, 1, 32, 32),
            &[0; 32],
            "capability bit 2 not agreed",
        ),
        (
            "a request with id 0",
            raw_header(Kind::Request as u8, 0, 0, 4, 4),
            b"ping",
            "non-zero id",
        ),
        (
            "a one-way message with an id",
            raw_header(Kind::OneWay as u8, 0, 5, 4, 4),
            b"ping",
            "carry id 0",
        ),
        (
            "a goodbye with an id",
            raw_header(Kind::Goodbye as u8, 0, 9, 0, 0),
            b"",
            "carry id 0",
        ),
        (
            "an unknown flag bit",
            raw_header(Kind::Request as u8, 0x40, 1, 4, 4),
            b"ping",
            "unknown frame flags",
        ),
        (
            "descriptors announced, not agreed",
            {
                let mut b = raw_header(Kind::Request as u8, 0, 1, 4, 4);
                b[6] = 1;
                b
            },
            b"ping",
            "capability bit 4",
        ),
        (
            "more descriptors than a message may carry",
            {
                let mut b = raw_header(Kind::Request as u8, 0, 1, 4, 4);
                b[6] = 65;
                b
            },
            b"ping",
            "more than the limit of 64",
        ),
        (
            "an unknown frame kind",
            raw_header(11, 0, 1, 4, 4),
            b"ping",
            "unknown frame kind",
        ),
    ];
    for (n, (what, header, payload, needle)) in cases.into_iter().enumerate() {
        let (w, s) = RawSession::open(&srv.addr, &hello(t));
        let mut s = s.unwrap_or_else(|| panic!("{t:?} {what}: refused: {w:?}"));
        // A valid call first: the rules bind a working session.
        s.send(FrameHeader::whole(Kind::Request, 1, 5), b"hello");
        let (h, body) = s.recv().expect("a response");
        assert_eq!((h.kind, body.as_slice()), (Kind::Response, &b"hello"[..]));
        s.send_raw(header, payload);
        s.expect_protocol_goodbye(needle, &format!("{t:?} {what}"));
        let line = lines.wait_for(needle);
        assert!(
            line.contains("protocol error") && line.contains(client_named(t)),
            "{t:?} {what}: log line {line:?}"
        );
        // The log line is written as the session ends, just before it
        // counts as closed.
        wait_until(&format!("{t:?} {what}: session closed"), LIMIT, || {
            srv.stats().sessions_closed.load(Ordering::Relaxed) as usize == n + 1
        });
    }
    assert_eq!(srv.stats().active_sessions(), 0);
    let mut c = connect(&srv.addr, ClientOptions::default());
    assert_eq!(c.call(b"still serving").expect("call"), b"still serving");
}

/// A session without chunked messages: a chunk is a protocol error, and the
/// server sends no message larger than one frame (a larger response becomes
/// an error reply).
fn chunks_need_the_capability(t: T) {
    let lines = Lines::default();
    let srv = logged_server(t, &lines);
    let no_chunks = Hello {
        caps: CAP_ONE_WAY,
        ..hello(t)
    };
    let (_, s) = RawSession::open(&srv.addr, &no_chunks);
    let mut s = s.expect("accepted");
    // Over shm one frame holds up to capacity / 2 - 32 bytes; over sockets 1 MiB.
    let single = if t == T::Shm { 65536 / 2 - 32 } else { 1 << 20 };
    s.send(FrameHeader::whole(Kind::Request, 1, 8), b"len:2000");
    let (h, body) = s.recv().expect("response");
    assert_eq!((h.kind, h.len, h.total), (Kind::Response, 2000, 2000));
    assert_eq!(body.len(), 2000);
    let ask = format!("len:{}", single + 1);
    s.send(
        FrameHeader::whole(Kind::Request, 2, ask.len()),
        ask.as_bytes(),
    );
    let (h, body) = s.recv().expect("error reply");
    assert_eq!(
        (h.kind, h.id),
        (Kind::Error, 2),
        "{t:?}: no chunked response"
    );
    let r = shmlink::RemoteError::decode(&body).expect("error body");
    assert_eq!(r.code, CODE_RESPONSE_TOO_LARGE, "{t:?}: {r:?}");
    // The client breaks the rule: a first chunk.
    let chunk = raw_header(Kind::Request as u8, 1, 3, 4, 8);
    s.send_raw(chunk, b"abcd");
    s.expect_protocol_goodbye(
        "chunked messages (capability bit 0) were not agreed",
        "chunk",
    );
    lines.wait_for("capability bit 0");
}

/// A session without one-way messages: a one-way frame is a protocol error;
/// our client refuses to send one there.
fn one_way_needs_the_capability(t: T) {
    let lines = Lines::default();
    let srv = logged_server(t, &lines);
    let (_, s) = RawSession::open(
        &srv.addr,
        &Hello {
            caps: CAP_CHUNKED,
            ..hello(t)
        },
    );
    let mut s = s.expect("accepted");
    s.send(FrameHeader::whole(Kind::OneWay, 0, 4), b"note");
    s.expect_protocol_goodbye(
        "one-way messages (capability bit 1) were not agreed",
        "one-way",
    );
    lines.wait_for("capability bit 1");
}

/// A hello announcing a largest message below the minimum is refused,
/// naming the minimum; our own options refuse it too; an error reply is cut
/// to fit the smallest limit.
fn a_small_limit_is_refused_and_error_replies_fit(t: T) {
    let srv = start(
        t,
        ServerOptions::default(),
        |_: &[u8], _: &mut Vec<u8>| -> Result<(), RemoteError> {
            Err(RemoteError::new(77, "é".repeat(3000)))
        },
    );
    let (w, s) = RawSession::open(
        &srv.addr,
        &Hello {
            max_message: 100,
            ..hello(t)
        },
    );
    assert!(s.is_none());
    match w {
        Welcome::Refused { code, message } => {
            assert_eq!(code, RefusalCode::BadRequest);
            assert!(
                message.contains("1024") && message.contains("100"),
                "{message}"
            );
        }
        other => panic!("{t:?}: {other:?}"),
    }
    let small = ClientOptions {
        max_message_size: MIN_MESSAGE_LIMIT - 1,
        ..Default::default()
    };
    assert!(matches!(
        Client::connect(&srv.addr, small),
        Err(Error::InvalidOption {
            name: "max_message_size",
            ..
        })
    ));
    let mut c = connect(
        &srv.addr,
        ClientOptions {
            max_message_size: MIN_MESSAGE_LIMIT,
            ..Default::default()
        },
    );
    match c.call(b"x") {
        Err(Error::Remote(r)) => {
            assert_eq!(r.code, 77);
            assert_eq!(
                r.message.len(),
                MIN_MESSAGE_LIMIT - 4,
                "cut to fit the client's limit"
            );
            assert!(
                r.message.chars().all(|ch| ch == 'é'),
                "cut at a character boundary"
            );
        }
        other => panic!("{t:?}: {other:?}"),
    }
    assert!(c.is_connected(), "an error reply leaves the session usable");
}

/// A hello dripped one byte at a time, each well within the timeout, is cut
/// off when the whole handshake's time is up.
fn the_handshake_has_one_deadline(t: T) {
    let srv = start(
        t,
        ServerOptions {
            handshake_timeout: Duration::from_millis(500),
            ..Default::default()
        },
        echo,
    );
    let mut sock = connect_raw(&srv.addr);
    let bytes = hello(t).encode();
    let mut writer = match &sock {
        Sock::Unix(s) => Sock::Unix(s.try_clone().expect("clone")),
        Sock::Tcp(s) => Sock::Tcp(s.try_clone().expect("clone")),
    };
    let t0 = Instant::now();
    let drip = thread::spawn(move || {
        for b in bytes {
            if writer.write_all(&[b]).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
    });
    let (w, _) = read_welcome(&mut sock);
    let took = t0.elapsed();
    match w {
        Welcome::Refused { code, message } => {
            assert_eq!(code, RefusalCode::BadRequest);
            assert!(message.contains("handshake timeout of 500ms"), "{message}");
        }
        other => panic!("{t:?}: a 4.8 s drip was accepted: {other:?}"),
    }
    eprintln!("{t:?}: dripped hello refused after {took:?}");
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(
        took < Duration::from_secs(2),
        "cut at the deadline, not per byte: {took:?}"
    );
    drop(sock);
    drip.join().expect("drip");
}

/// A client that stops reading its responses: the server gives up after
/// `send_timeout` on every transport, logs it, and holds no thread. Over
/// `shm:` and `unix:` the first responses are lent from the session's
/// arena until it is full (8 MiB here): a client that does not read holds
/// at most that much of the server's memory, then the rest streams.
fn a_client_that_stops_reading_loses_its_session(t: T) {
    let lines = Lines::default();
    let srv = start(
        t,
        ServerOptions {
            send_timeout: Duration::from_millis(300),
            log: lines.log(),
            max_arena_bytes: 8 << 20,
            ..Default::default()
        },
        echo,
    );
    let mut c = connect(&srv.addr, ClientOptions::default());
    // 16 responses of 2 MiB: more than the arena, the ring or any socket
    // buffer holds.
    for _ in 0..16 {
        c.send(b"len:2097152").expect("send");
    }
    let took = wait_until("the stalled session ended", Duration::from_secs(10), || {
        srv.stats().sessions_closed.load(Ordering::Relaxed) == 1
    });
    eprintln!("{t:?}: a client that stopped reading lost its session after {took:?}");
    let line = lines.wait_for("stopped reading");
    assert!(line.contains(client_named(t)), "{line}");
    assert_eq!(srv.stats().active_sessions(), 0);
    // What was sent before it gave up still arrives; then the session is over.
    let mut got = 0;
    let end = loop {
        match c.recv() {
            Ok(r) => {
                assert_eq!(r.result.expect("a response").len(), 2 << 20);
                got += 1;
            }
            Err(e) => break e,
        }
    };
    assert!(
        got < 16,
        "{t:?}: all 16 responses came: the server never stalled"
    );
    assert!(
        is_gone_or_closed(&end) || matches!(end, Error::Protocol { .. }),
        "{t:?}: {end:?}"
    );
}

/// A stopping server answers what it received, then says goodbye: the
/// client's next call fails with the reason, not with a bare hang-up.
fn a_stopping_server_says_goodbye(t: T) {
    let mut srv = start(t, ServerOptions::default(), echo);
    let mut c = connect(&srv.addr, ClientOptions::default());
    assert_eq!(c.call(b"before").expect("call"), b"before");
    let addr = srv.addr.clone();
    srv.take().stop().expect("stop");
    match c.call(b"after") {
        Err(Error::Closed { reason, .. }) => {
            assert!(
                reason.contains(&format!("{CODE_SHUTTING_DOWN:#x}"))
                    && reason.contains("shutting down"),
                "{t:?}: {reason}"
            );
        }
        other => panic!("{t:?} ({addr}): expected Closed with the server's reason, got {other:?}"),
    }
}

// ---------- many rule breakers at once ----------

/// One attack of the storm; panics when the server did not behave as the
/// rules say.
fn attack(t: T, addr: &str, kind: u64, rng: &mut Rng) {
    let what = [
        "drip",
        "tiny limit",
        "chunk",
        "one-way",
        "id 0",
        "stalled reader",
        "good call",
    ][kind as usize];
    match kind {
        0 => {
            // Half a hello, then nothing: refused at the handshake deadline.
            let mut sock = connect_raw(addr);
            sock.write_all(&hello(t).encode()[..20])
                .expect("half a hello");
            let (w, _) = read_welcome(&mut sock);
            assert!(
                matches!(
                    w,
                    Welcome::Refused {
                        code: RefusalCode::BadRequest,
                        ..
                    }
                ),
                "{t:?} {what}: {w:?}"
            );
        }
        1 => {
            let h = Hello {
                max_message: rng.below(MIN_MESSAGE_LIMIT as u64),
                ..hello(t)
            };
            let (w, s) = RawSession::open(addr, &h);
            assert!(s.is_none(), "{t:?} {what}: accepted");
            assert!(matches!(
                w,
                Welcome::Refused {
                    code: RefusalCode::BadRequest,
                    ..
                }
            ));
        }
        2..=4 => {
            let caps = if kind == 2 { CAP_ONE_WAY } else { CAP_CHUNKED };
            let (_, s) = RawSession::open(addr, &Hello { caps, ..hello(t) });
            let mut s = s.expect("accepted");
            let (header, needle) = match kind {
                2 => (
                    raw_header(Kind::Request as u8, 1, 1, 4, 8),
                    "capability bit 0",
                ),
                3 => (
                    raw_header(Kind::OneWay as u8, 0, 0, 4, 4),
                    "capability bit 1",
                ),
                _ => (raw_header(Kind::Request as u8, 0, 0, 4, 4), "non-zero id"),
            };
            s.send_raw(header, b"abcd");
            s.expect_protocol_goodbye(needle, &format!("{t:?} {what}"));
        }
        5 => {
            let mut c = connect(addr, ClientOptions::default());
            for _ in 0..4 {
                c.send(b"len:4194304").expect("send");
            }
            // Reads nothing; dropped with its responses pending.
            thread::sleep(Duration::from_millis(rng.below(300)));
        }
        _ => {
            let mut c = connect(addr, ClientOptions::default());
            let n = 1 + rng.below(5000) as usize;
            let req = rng.bytes(n);
            assert_eq!(c.call(&req).expect("a good call"), req, "{t:?} {what}");
        }
    }
}

/// Rule breakers of every kind at once, from several threads, against one
/// server per transport: each is refused or told off as the rules say,
/// good calls in between are answered correctly, and afterwards no session
/// is left and the server still serves.
#[test]
fn a_storm_of_rule_breakers_leaves_the_server_healthy() {
    watchdog(
        "a_storm_of_rule_breakers_leaves_the_server_healthy",
        LIMIT,
        || {
            for t in T::ALL {
                let srv = start(
                    t,
                    ServerOptions {
                        handshake_timeout: Duration::from_millis(300),
                        send_timeout: Duration::from_millis(200),
                        log: Log::off(),
                        ..Default::default()
                    },
                    echo,
                );
                let workers: Vec<_> = (0..6u64)
                    .map(|w| {
                        let addr = srv.addr.clone();
                        thread::spawn(move || {
                            let mut rng = Rng::new(w * 7919 + t as u64);
                            for _ in 0..12 {
                                let kind = rng.below(7);
                                attack(t, &addr, kind, &mut rng);
                            }
                        })
                    })
                    .collect();
                for w in workers {
                    w.join().expect("an attack went other than the rules say");
                }
                wait_until(
                    "every session of the storm ended",
                    Duration::from_secs(10),
                    || srv.stats().active_sessions() == 0,
                );
                let mut c = connect(&srv.addr, ClientOptions::default());
                assert_eq!(
                    c.call(b"after the storm").expect("call"),
                    b"after the storm"
                );
                eprintln!(
                    "{t:?}: storm over; {} sessions, {} refused",
                    srv.stats().sessions_opened.load(Ordering::Relaxed),
                    srv.stats().refused.load(Ordering::Relaxed)
                );
            }
        },
    );
}

// ---------- stream only ----------

/// A stream hello's ring fields mean nothing: the server ignores them
/// (whatever they hold) and echoes them in the welcome.
#[test]
fn stream_hellos_ignore_ring_sizes() {
    watchdog("stream_hellos_ignore_ring_sizes", LIMIT, || {
        for t in [T::Unix, T::Tcp] {
            let srv = start(t, ServerOptions::default(), echo);
            for ring in [0u32, 12345, u32::MAX] {
                let h = Hello {
                    ring_c2s: ring,
                    ring_s2c: ring,
                    ..hello(t)
                };
                let (w, s) = RawSession::open(&srv.addr, &h);
                match w {
                    Welcome::Accepted {
                        ring_c2s, ring_s2c, ..
                    } => assert_eq!((ring_c2s, ring_s2c), (ring, ring), "{t:?}"),
                    other => panic!("{t:?}: ring fields {ring} refused: {other:?}"),
                }
                let mut s = s.expect("session");
                s.send(FrameHeader::whole(Kind::Request, 1, 2), b"ok");
                assert_eq!(s.recv().expect("response").1, b"ok");
            }
        }
    });
}

/// Our client keeps to what a server agreed: against a server that agrees
/// to no capability it sends neither one-way messages nor chunks (refused
/// locally, nothing sent, the session still usable).
#[test]
fn a_client_keeps_to_what_the_server_agreed() {
    watchdog("a_client_keeps_to_what_the_server_agreed", LIMIT, || {
        let dir = TempDir::new("agreed");
        let path = dir.join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut hb = [0u8; 48];
            s.read_exact(&mut hb).expect("hello");
            let h = Hello::decode(&hb).expect("a valid hello");
            assert_eq!(
                (h.ring_c2s, h.ring_s2c),
                (0, 0),
                "a stream hello carries no ring sizes"
            );
            let w = Welcome::Accepted {
                version: 1,
                caps: 0,
                session_id: 1,
                ring_c2s: 0,
                ring_s2c: 0,
                max_message: 64 << 20,
            };
            s.write_all(&w.encode()).expect("welcome");
            // Answer one call, then see what else arrives.
            let mut fh = [0u8; HEADER_LEN];
            s.read_exact(&mut fh).expect("request header");
            let h = FrameHeader::decode(&fh).expect("a frame");
            let mut body = vec![0u8; h.len as usize];
            s.read_exact(&mut body).expect("request");
            let reply = FrameHeader::whole(Kind::Response, h.id, body.len());
            s.write_all(&reply.encode()).expect("reply");
            s.write_all(&body).expect("reply body");
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            rest
        });
        let addr = format!("unix:{}", path.display());
        let mut c = Client::connect(&addr, ClientOptions::default()).expect("connect");
        match c.notify(b"note") {
            Err(e @ Error::NotAgreed { .. }) => assert!(e.to_string().contains("capability bit 1")),
            other => panic!("notify without the capability: {other:?}"),
        }
        match c.call(&vec![1u8; (1 << 20) + 1]) {
            Err(Error::MessageTooLarge { max, .. }) => assert_eq!(max, 1 << 20, "one frame"),
            other => panic!("a message needing chunks: {other:?}"),
        }
        assert_eq!(c.call(b"fits").expect("a call that fits"), b"fits");
        drop(c);
        let rest = server.join().expect("fake server");
        // Only an empty goodbye followed the call.
        let bye = FrameHeader::whole(Kind::Goodbye, 0, 0).encode();
        assert_eq!(rest, bye.to_vec(), "nothing refused reached the server");
    });
}

// ---------- shm only ----------

/// The control socket of an `shm:` session carries nothing after the
/// handshake: bytes there end the session, with a goodbye saying so.
#[test]
fn bytes_on_the_control_socket_end_the_session() {
    watchdog("bytes_on_the_control_socket_end_the_session", LIMIT, || {
        let lines = Lines::default();
        let srv = logged_server(T::Shm, &lines);
        let (_, s) = RawSession::open(&srv.addr, &hello(T::Shm));
        let mut s = s.expect("accepted");
        s.send(FrameHeader::whole(Kind::Request, 1, 2), b"hi");
        assert!(s.recv().is_some());
        s.sock.write_all(b"?").expect("write to the control socket");
        s.expect_protocol_goodbye("control socket", "bytes on the control socket");
        lines.wait_for("control socket");
    });
}

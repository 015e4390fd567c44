//! Responses lent from the server's arena (capability bit 5): large
//! responses travel as descriptors and the client reads them in place
//! (`Client::call_response`) or copies them out (`call`, `recv`); handlers
//! write responses in place (`Answer::loan`); buffers go back to the server
//! and are reused; a full arena streams; where bit 5 is not agreed,
//! everything streams.

mod support;

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use shmlink::wire::{
    encode_release, Descriptor, FrameHeader, Hello, Kind, SegmentNotice, Welcome, CAPS,
    CAP_DESCRIPTORS, CAP_FDS, CAP_LENT_RESPONSES, HEADER_LEN, HELLO_LEN,
};
use shmlink::{Answer, ClientOptions, Error, InPlace, RemoteError, ServerOptions};
use shmlink_sys::{fdpass, memfd};
use support::{connect, start, watchdog, xform, xform_into, Rng, TempDir, LIMIT, T};

fn opts() -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(20),
        max_message_size: 64 << 20,
        ..ClientOptions::default()
    }
}

fn server_opts() -> ServerOptions {
    ServerOptions {
        max_message_size: 64 << 20,
        ..ServerOptions::default()
    }
}

/// Answers `len:N` with N bytes of a pattern, anything else with its
/// transform.
fn sized(req: &[u8], resp: &mut Vec<u8>) -> Result<(), RemoteError> {
    match std::str::from_utf8(req)
        .ok()
        .and_then(|s| s.strip_prefix("len:"))
    {
        Some(n) => {
            let n: usize = n.parse().map_err(|_| RemoteError::new(1, "bad len"))?;
            resp.extend((0..n).map(|i| (i % 251) as u8));
        }
        None => xform_into(req, resp),
    }
    Ok(())
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

fn large_responses_are_lent_and_read_in_place(t: T) {
    let srv = start(t, server_opts(), sized);
    let mut c = connect(&srv.addr, opts());
    for n in [64 << 10, 1 << 20, 16 << 20, 3_000_001] {
        let r = c
            .call_response(format!("len:{n}").as_bytes())
            .expect("call");
        assert!(r.is_lent(), "{n} bytes: lent");
        assert!(*r == pattern(n)[..], "{n} bytes");
    }
    let small = c.call_response(b"len:100").expect("small");
    assert!(!small.is_lent(), "below the threshold: streamed");
    assert_eq!(&*small, &pattern(100)[..]);
    // `call` copies a lent response out; `recv` too.
    assert_eq!(c.call(b"len:2000000").expect("call"), pattern(2_000_000));
    let id = c.send(b"len:1000000").expect("send");
    let r = c.recv().expect("recv");
    assert_eq!(r.id, id);
    assert_eq!(r.result.expect("response"), pattern(1_000_000));
}

/// A server of `sized` responses whose sessions lend from at most 40 MiB,
/// and a client of it.
fn small_arena(t: T) -> (support::Srv, shmlink::Client) {
    let opts40 = ServerOptions {
        max_arena_bytes: 40 << 20,
        ..server_opts()
    };
    let srv = start(t, opts40, sized);
    let c = connect(&srv.addr, opts());
    (srv, c)
}

/// Buffers go back to the server as their responses are dropped: a server
/// arena of 40 MiB serves 30 responses of 16 MiB, every one lent.
fn released_buffers_are_reused(t: T) {
    let (_srv, mut c) = small_arena(t);
    let want = pattern(16 << 20);
    for i in 0..30 {
        let r = c.call_response(b"len:16777216").expect("call");
        assert!(r.is_lent(), "call {i}: lent (the buffers came back)");
        assert!(*r == want[..], "call {i}");
    }
}

/// Responses held by the client fill the server's arena: the next large
/// response streams, correct; once they are dropped, responses are lent
/// again.
fn a_full_server_arena_streams(t: T) {
    let (_srv, mut c) = small_arena(t);
    let want = pattern(16 << 20);
    let a = c.call_response(b"len:16777216").expect("first");
    let b = c.call_response(b"len:16777216").expect("second");
    assert!(a.is_lent() && b.is_lent());
    let third = c.call_response(b"len:16777216").expect("third");
    assert!(!third.is_lent(), "no room left: streamed");
    assert!(*third == want[..]);
    assert!(*a == want[..] && *b == want[..], "held responses unchanged");
    drop((a, b, third));
    let again = c.call_response(b"len:16777216").expect("again");
    assert!(again.is_lent(), "room again once released");
}

/// A handler writes its response in place: lent when large, in the
/// ordinary buffer when small; `bytes()` after `loan()` moves it back.
fn handlers_write_in_place(t: T) {
    let handler = InPlace(
        |req: &[u8], _fds, answer: &mut Answer<'_>| -> Result<(), RemoteError> {
            let text = std::str::from_utf8(req).unwrap_or("");
            let (mode, n) = text.split_once(':').unwrap_or(("", "0"));
            let n: usize = n.parse().unwrap_or(0);
            if mode == "try" {
                // Only in the arena, or the caller writes it elsewhere.
                match answer.try_loan(n) {
                    Some(buf) => buf.copy_from_slice(&pattern(n)),
                    None => answer.bytes().extend_from_slice(&pattern(n)),
                }
                return Ok(());
            }
            let buf = answer.loan(n);
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (i % 251) as u8;
            }
            let lent = answer.is_lent();
            match mode {
                "back" => answer.bytes().extend_from_slice(b"!"),
                "check" if lent != (n >= 64 << 10) => {
                    return Err(RemoteError::new(7, format!("lent {lent} for {n}")))
                }
                "fail" => return Err(RemoteError::new(9, "failed after a loan")),
                _ => {}
            }
            Ok(())
        },
    );
    let srv = start(t, server_opts(), handler);
    let mut c = connect(&srv.addr, opts());
    let lends = t != T::Tcp;
    for n in [10, 64 << 10, 5 << 20] {
        let r = c.call_response(format!("check:{n}").as_bytes());
        let r = match r {
            Err(Error::Remote(e)) if !lends && e.code == 7 => continue,
            r => r.expect("in place"),
        };
        assert_eq!(r.is_lent(), lends && n >= 64 << 10, "{n}");
        assert!(*r == pattern(n)[..]);
    }
    for n in [10, 5 << 20] {
        let r = c
            .call_response(format!("try:{n}").as_bytes())
            .expect("try_loan");
        assert_eq!(r.is_lent(), lends && n >= 64 << 10, "try_loan {n}");
        assert!(*r == pattern(n)[..]);
    }
    let mut want = pattern(1 << 20);
    want.push(b'!');
    // (Moved back into the ordinary buffer, it is still large: the server
    // lends a copy of it.)
    let r = c.call_response(b"back:1048576").expect("moved back");
    assert!(*r == want[..]);
    match c.call(b"fail:1048576") {
        Err(Error::Remote(e)) => assert_eq!(e.code, 9),
        r => panic!("expected the handler's error, got {r:?}"),
    }
    // The failed call's loan went back: the session goes on, lending.
    let r = c.call_response(b"plain:2000000").expect("after a failure");
    assert_eq!(r.is_lent(), lends);
    assert!(*r == pattern(2_000_000)[..]);
}

/// A response larger than the client accepts is refused whether it was
/// lent or not: the caller gets the too-large error, the session goes on.
fn a_lent_response_over_the_clients_limit_is_an_error(t: T) {
    let handler = InPlace(|_req: &[u8], _fds, answer: &mut Answer<'_>| {
        answer.loan(3 << 20).fill(1);
        Ok(())
    });
    let srv = start(t, server_opts(), handler);
    let mut c = connect(
        &srv.addr,
        ClientOptions {
            max_message_size: 2 << 20,
            ..opts()
        },
    );
    match c.call(b"x") {
        Err(Error::Remote(e)) => assert!(e.message.contains("exceeds"), "{}", e.message),
        r => panic!("expected a too-large error, got {r:?}"),
    }
    assert!(c.is_connected(), "the session goes on");
}

/// Where bit 5 is not agreed (a client or server with no arena), large
/// responses stream.
fn no_arena_streams(t: T) {
    let srv = start(
        t,
        ServerOptions {
            max_arena_bytes: 0,
            ..server_opts()
        },
        sized,
    );
    let mut c = connect(&srv.addr, opts());
    let r = c
        .call_response(b"len:2000000")
        .expect("server without arena");
    assert!(!r.is_lent());
    assert!(*r == pattern(2_000_000)[..]);
    let srv = start(t, server_opts(), sized);
    let mut c = connect(
        &srv.addr,
        ClientOptions {
            max_arena_bytes: 0,
            ..opts()
        },
    );
    let r = c
        .call_response(b"len:2000000")
        .expect("client without arena");
    assert!(!r.is_lent());
    assert!(*r == pattern(2_000_000)[..]);
    let req = Rng::new(3).bytes(300_000);
    assert_eq!(c.call(&req).expect("echo"), xform(&req));
}

/// A lent response outlives its session: the mapping stays until it is
/// dropped.
fn a_held_response_outlives_the_server(t: T) {
    let srv = start(t, server_opts(), sized);
    let mut c = connect(&srv.addr, opts());
    let r = c.call_response(b"len:4000000").expect("call");
    drop(srv);
    assert!(*r == pattern(4_000_000)[..], "still readable");
    assert!(c.call(b"len:10").is_err(), "the session is over");
    drop(r);
}

crate::shm_and_unix!(
    large_responses_are_lent_and_read_in_place,
    released_buffers_are_reused,
    a_full_server_arena_streams,
    handlers_write_in_place,
    a_lent_response_over_the_clients_limit_is_an_error,
    no_arena_streams,
    a_held_response_outlives_the_server,
);

/// Over `tcp:` nothing is lent; the same calls work.
#[test]
fn tcp_streams_responses() {
    watchdog("tcp::streams", LIMIT, || {
        let srv = start(T::Tcp, server_opts(), sized);
        let mut c = connect(&srv.addr, opts());
        let r = c.call_response(b"len:2000000").expect("call");
        assert!(!r.is_lent());
        assert!(*r == pattern(2_000_000)[..]);
        handlers_write_in_place(T::Tcp);
    });
}

// ---------- servers that lie about their arena ----------

/// A fake `unix:` server: accepts one client, welcomes it with `caps`,
/// reads its first request frame and answers it with `lie` (given the
/// socket and the call id); keeps the connection until the client is done.
fn lying_server<F>(caps: u64, lie: F) -> (TempDir, String, std::thread::JoinHandle<()>)
where
    F: FnOnce(&UnixStream, u64) + Send + 'static,
{
    let dir = TempDir::new("lying");
    let path = dir.join("s.sock");
    let l = UnixListener::bind(&path).expect("bind");
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let mut hb = [0u8; HELLO_LEN];
        s.read_exact(&mut hb).expect("hello");
        let hello = Hello::decode(&hb).expect("hello decodes");
        let welcome = Welcome::Accepted {
            version: 1,
            caps: hello.caps & caps,
            session_id: 1,
            ring_c2s: hello.ring_c2s,
            ring_s2c: hello.ring_s2c,
            max_message: 1 << 20,
        };
        s.write_all(&welcome.encode()).expect("welcome");
        let mut hdr = [0u8; HEADER_LEN];
        s.read_exact(&mut hdr).expect("request header");
        let h = FrameHeader::decode(&hdr).expect("request header decodes");
        let mut body = vec![0u8; h.len as usize];
        s.read_exact(&mut body).expect("request body");
        lie(&s, h.id);
        // Until the client hangs up (after its goodbye).
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    (dir, format!("unix:{}", path.display()), h)
}

fn frame_bytes(kind: Kind, id: u64, body: &[u8]) -> Vec<u8> {
    let mut v = FrameHeader::whole(kind, id, body.len()).encode().to_vec();
    v.extend_from_slice(body);
    v
}

/// Each lie a server can tell about its arena ends the client's session
/// with a protocol error that names it.
#[test]
fn lying_servers_end_the_session() {
    watchdog("lying servers", LIMIT, || {
        let lent = CAPS | CAP_FDS | CAP_LENT_RESPONSES;
        let descriptor = Descriptor {
            slot: 0,
            generation: 1,
            offset: 0,
            length: 100,
        }
        .encode();
        type Lie = Box<dyn FnOnce(&UnixStream, u64) + Send>;
        let cases: Vec<(&str, u64, Lie, &str)> = vec![
            (
                "a descriptor naming no segment",
                lent,
                Box::new(move |s: &UnixStream, id| {
                    (&*s)
                        .write_all(&frame_bytes(Kind::Descriptor, id, &descriptor))
                        .expect("lie");
                }),
                "no segment registered",
            ),
            (
                "a descriptor without bit 5",
                CAPS | CAP_FDS,
                Box::new(move |s: &UnixStream, id| {
                    (&*s)
                        .write_all(&frame_bytes(Kind::Descriptor, id, &descriptor))
                        .expect("lie");
                }),
                "reads no lent buffers",
            ),
            (
                "a segment that is not sealed",
                lent,
                Box::new(|s: &UnixStream, _| {
                    let fd = memfd::create_sealed("plain", 65536).expect("memfd");
                    let n = SegmentNotice {
                        slot: 0,
                        retire: false,
                        generation: 1,
                    }
                    .encode();
                    let mut h = FrameHeader::whole(Kind::Segment, 0, n.len());
                    h.fds = 1;
                    let mut bytes = h.encode().to_vec();
                    bytes.extend_from_slice(&n);
                    fdpass::send_with_fds(s, &bytes, &[fd.as_fd()]).expect("lie");
                }),
                "not sealed",
            ),
            (
                "a release of a buffer never lent",
                lent | CAP_DESCRIPTORS,
                Box::new(|s: &UnixStream, _| {
                    let body = encode_release(&[(0, 1, 0)]);
                    (&*s)
                        .write_all(&frame_bytes(Kind::Release, 0, &body))
                        .expect("lie");
                }),
                "no buffer is lent there",
            ),
        ];
        for (what, caps, lie, want) in cases {
            let (_dir, addr, h) = lying_server(caps, lie);
            let mut c = connect(&addr, opts());
            match c.call_response(b"hello") {
                Err(Error::Protocol { detail, .. }) => {
                    assert!(detail.contains(want), "{what}: {detail}")
                }
                r => panic!("{what}: expected a protocol error, got {r:?}"),
            }
            drop(c);
            h.join().expect("fake server");
        }
    });
}

//! Requests lent from the client's arena (capability bit 2): the transparent
//! path for large calls and explicit loans, over `shm:` and `unix:`; reuse
//! without growth; limits (`ArenaFull`, streaming instead); `tcp:` and
//! servers that take no lent requests; lies from a hand-made client.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::os::fd::{AsFd, BorrowedFd};

use shmlink::wire::{
    encode_release, Descriptor, FrameHeader, Kind, SegmentNotice, CAPS, CAP_DESCRIPTORS, CAP_FDS,
    NOTICE_LEN,
};
use shmlink::{ClientOptions, Error, ServerOptions};
use shmlink_sys::{fdpass, memfd};
use support::raw::{hello, RawSession, Sock};
use support::{connect, start, watchdog, xform, xform_into, Gate, OpenOnDrop, Rng, LIMIT, T};

fn opts() -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(20),
        max_message_size: 256 << 20,
        ..ClientOptions::default()
    }
}

fn server_opts() -> ServerOptions {
    ServerOptions {
        max_message_size: 256 << 20,
        ..ServerOptions::default()
    }
}

fn echo() -> impl shmlink::Handler {
    |req: &[u8], resp: &mut Vec<u8>| {
        xform_into(req, resp);
        Ok(())
    }
}

fn large_calls_go_through_the_arena(t: T) {
    let srv = start(t, server_opts(), echo());
    let mut c = connect(&srv.addr, opts());
    let mut rng = Rng::new(7);
    assert_eq!(c.arena_bytes(), 0, "nothing mapped before a large call");
    for len in [64 << 10, 1 << 20, 5 << 20, 16 << 20, 100, 64 << 10] {
        let req = rng.bytes(len);
        assert_eq!(c.call(&req).expect("call"), xform(&req), "{len} bytes");
    }
    let mapped = c.arena_bytes();
    assert!(mapped > 0, "large calls used the arena");
    // The same sizes again: buffers are reused, nothing more is mapped.
    for _ in 0..5 {
        let req = rng.bytes(16 << 20);
        assert_eq!(c.call(&req).expect("call"), xform(&req));
    }
    assert_eq!(c.arena_bytes(), mapped, "no growth");
}

fn a_loan_is_filled_in_place(t: T) {
    let srv = start(t, server_opts(), echo());
    let mut c = connect(&srv.addr, opts());
    for i in 0..10u8 {
        let mut loan = c.loan(3 << 20).expect("loan");
        loan.fill(i);
        loan[0] = 0xEE;
        let want = {
            let mut v = vec![i; 3 << 20];
            v[0] = 0xEE;
            xform(&v)
        };
        assert_eq!(c.call_loan(loan).expect("call_loan"), want);
    }
    // An unsent loan goes back.
    drop(c.loan(1 << 20).expect("loan"));
    assert_eq!(c.call(b"small").expect("call"), xform(b"small"));
}

fn a_full_arena_is_reported_and_calls_stream(t: T) {
    let srv = start(t, server_opts(), echo());
    let mut c = connect(
        &srv.addr,
        ClientOptions {
            max_arena_bytes: 12 << 20,
            ..opts()
        },
    );
    let held = c.loan(5 << 20).expect("first");
    let held2 = c.loan(5 << 20).expect("second");
    match c.loan(5 << 20).expect_err("third") {
        Error::ArenaFull { detail, .. } => {
            assert!(detail.contains("12582912"), "{detail}")
        }
        e => panic!("expected ArenaFull, got {e}"),
    }
    // A call that cannot borrow streams instead.
    let req = vec![3u8; 5 << 20];
    assert_eq!(c.call(&req).expect("streamed call"), xform(&req));
    drop((held, held2));
    assert_eq!(c.call(&req).expect("lent call"), xform(&req));
}

/// With `loan_wait`, a full arena waits for the release of a call that
/// timed out (it comes with the server's late answer); with nothing
/// outstanding it fails at once all the same.
fn a_full_arena_waits_when_asked(t: T) {
    let gate = Arc::new(Gate::closed());
    let g = Arc::clone(&gate);
    let handler = move |req: &[u8], resp: &mut Vec<u8>| {
        if req.len() > 1000 {
            g.pass();
        }
        xform_into(req, resp);
        Ok(())
    };
    let srv = start(t, server_opts(), handler);
    let _open = OpenOnDrop(Arc::clone(&gate));
    let mut c = connect(
        &srv.addr,
        ClientOptions {
            max_arena_bytes: 12 << 20,
            loan_wait: true,
            ..opts()
        },
    );
    let mut held = c.loan(8 << 20).expect("first");
    let t0 = Instant::now();
    let e = c.loan(8 << 20).expect_err("nothing outstanding");
    assert!(matches!(e, Error::ArenaFull { .. }), "{e}");
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "no wait: {:?}",
        t0.elapsed()
    );
    held.fill(5);
    match c.call_loan_timeout(held, Duration::from_millis(50)) {
        Err(Error::Timeout { .. }) => {}
        r => panic!("expected a timeout, got {r:?}"),
    }
    assert!(
        gate.wait_entered(1, Duration::from_secs(10)),
        "handler reached"
    );
    gate.open();
    let again = c
        .loan(8 << 20)
        .expect("room once the server released the buffer");
    drop(again);
    assert_eq!(c.call(b"after").expect("call"), xform(b"after"));
}

fn refused_where_not_agreed(t: T) {
    let srv = start(
        t,
        ServerOptions {
            max_arena_bytes: 0,
            ..server_opts()
        },
        echo(),
    );
    let mut c = connect(&srv.addr, opts());
    let e = c.loan(1 << 20).expect_err("no arena");
    assert!(matches!(e, Error::NotAgreed { .. }), "{e}");
    let req = vec![9u8; 2 << 20];
    assert_eq!(c.call(&req).expect("streams"), xform(&req));
    assert_eq!(c.arena_bytes(), 0);
}

/// A hand-made client that agreed on the arena names a segment it never
/// registered: the server ends its session with a protocol error.
fn a_descriptor_naming_no_segment_ends_the_session(t: T) {
    let srv = start(t, server_opts(), echo());
    let mut h = hello(t);
    h.caps = CAPS | CAP_FDS | CAP_DESCRIPTORS;
    let (_, s) = RawSession::open(&srv.addr, &h);
    let mut s = s.expect("accepted");
    let d = Descriptor {
        slot: 3,
        generation: 1,
        offset: 0,
        length: 100,
    }
    .encode();
    s.send(FrameHeader::whole(Kind::Descriptor, 1, d.len()), &d);
    s.expect_protocol_goodbye("no segment registered", &format!("{t:?} lying descriptor"));
    let mut c = connect(&srv.addr, opts());
    assert_eq!(
        c.call(b"others go on").expect("call"),
        xform(b"others go on")
    );
}

/// Sends one frame with one descriptor attached, as the protocol says: on
/// `shm:` a record on the control socket first, on `unix:` with the frame's
/// first byte.
fn send_with_fd(s: &mut RawSession, h: FrameHeader, payload: &[u8], fd: BorrowedFd<'_>) {
    let Sock::Unix(sock) = &s.sock else {
        panic!("descriptors need a Unix socket");
    };
    if s.rings.is_some() {
        let mut record = b"SLFD".to_vec();
        record.extend_from_slice(&1u32.to_le_bytes());
        record.extend_from_slice(&h.id.to_le_bytes());
        fdpass::send_with_fds(sock, &record, &[fd]).expect("record");
        s.send(h, payload);
    } else {
        let mut bytes = h.encode().to_vec();
        bytes.extend_from_slice(payload);
        fdpass::send_with_fds(sock, &bytes, &[fd]).expect("frame with fd");
    }
}

fn notice(slot: u32, generation: u64, retire: bool) -> [u8; NOTICE_LEN] {
    SegmentNotice {
        slot,
        retire,
        generation,
    }
    .encode()
}

fn descriptor(slot: u32, generation: u64, offset: u64, length: u64) -> Vec<u8> {
    Descriptor {
        slot,
        generation,
        offset,
        length,
    }
    .encode()
    .to_vec()
}

/// What a lying client does on its session.
type Lie = Box<dyn Fn(&mut RawSession)>;

/// Hand-made clients that agreed on the arena tell each lie the arena
/// frames allow; each loses its session with a protocol error naming it,
/// and an honest client is served afterwards.
fn lying_arena_frames_end_the_session(t: T) {
    let srv = start(t, server_opts(), echo());
    let seg = 64 << 10;
    let cases: Vec<(&str, Lie, &str)> = vec![
        (
            "a segment that is not sealed",
            Box::new(|s| {
                let fd = memfd::create_sealed("plain", 65536).expect("memfd");
                let n = notice(0, 1, false);
                let h = FrameHeader {
                    fds: 1,
                    ..FrameHeader::whole(Kind::Segment, 0, n.len())
                };
                send_with_fd(s, h, &n, fd.as_fd());
            }),
            "not sealed",
        ),
        (
            "a registration without its memfd",
            Box::new(|s| {
                let n = notice(0, 1, false);
                s.send(FrameHeader::whole(Kind::Segment, 0, n.len()), &n);
            }),
            "with 0 file descriptors",
        ),
        (
            "retiring a segment never registered",
            Box::new(|s| {
                let n = notice(2, 1, true);
                s.send(FrameHeader::whole(Kind::Segment, 0, n.len()), &n);
            }),
            "no such segment",
        ),
        (
            "a descriptor past the end of its segment",
            Box::new(move |s| {
                register(s, 0, 5, seg);
                let d = descriptor(0, 5, seg - 8, 16);
                s.send(FrameHeader::whole(Kind::Descriptor, 1, d.len()), &d);
            }),
            "not inside",
        ),
        (
            "a descriptor of another generation",
            Box::new(move |s| {
                register(s, 0, 5, seg);
                let d = descriptor(0, 4, 0, 16);
                s.send(FrameHeader::whole(Kind::Descriptor, 1, d.len()), &d);
            }),
            "holds generation 5",
        ),
        (
            "a descriptor over the largest message",
            Box::new(move |s| {
                register(s, 0, 5, seg);
                let d = descriptor(0, 5, 0, (256 << 20) + 1);
                s.send(FrameHeader::whole(Kind::Descriptor, 1, d.len()), &d);
            }),
            "exceeds the maximum message size",
        ),
        (
            "a registration that is not newer",
            Box::new(move |s| {
                register(s, 0, 5, seg);
                register(s, 0, 5, seg);
            }),
            "not newer",
        ),
        (
            "a release sent to the server",
            Box::new(|s| {
                let r = encode_release(&[(0, 1, 0)]);
                s.send(FrameHeader::whole(Kind::Release, 0, r.len()), &r);
            }),
            "release frame, but",
        ),
    ];
    for (what, lie, needle) in cases {
        let mut h = hello(t);
        h.caps = CAPS | CAP_FDS | CAP_DESCRIPTORS;
        let (_, s) = RawSession::open(&srv.addr, &h);
        let mut s = s.expect("accepted");
        lie(&mut s);
        s.expect_protocol_goodbye(needle, &format!("{t:?} {what}"));
    }
    let mut c = connect(&srv.addr, opts());
    let req = vec![5u8; 1 << 20];
    assert_eq!(c.call(&req).expect("an honest client"), xform(&req));
}

/// Registers an arena segment of `len` bytes at `slot`.
fn register(s: &mut RawSession, slot: u32, generation: u64, len: u64) {
    let (fd, _map) = memfd::create_arena("lie", len).expect("arena segment");
    let n = notice(slot, generation, false);
    let h = FrameHeader {
        fds: 1,
        ..FrameHeader::whole(Kind::Segment, 0, n.len())
    };
    send_with_fd(s, h, &n, fd.as_fd());
}

fn tcp_refuses_loans() {
    let srv = start(T::Tcp, server_opts(), echo());
    let mut c = connect(&srv.addr, opts());
    let e = c.loan(1 << 20).expect_err("tcp");
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let req = vec![1u8; 1 << 20];
    assert_eq!(c.call(&req).expect("streams"), xform(&req));
}

crate::shm_and_unix!(
    large_calls_go_through_the_arena,
    a_loan_is_filled_in_place,
    a_full_arena_is_reported_and_calls_stream,
    a_full_arena_waits_when_asked,
    refused_where_not_agreed,
    a_descriptor_naming_no_segment_ends_the_session,
    lying_arena_frames_end_the_session
);

#[test]
fn tcp() {
    watchdog("tcp", LIMIT, tcp_refuses_loans);
}

//! Requests lent from the client's arena (capability bit 2): the transparent
//! path for large calls and explicit loans, over `shm:` and `unix:`; reuse
//! without growth; limits (`ArenaFull`, streaming instead); `tcp:` and
//! servers that take no lent requests; lies from a hand-made client.

mod support;

use std::time::Duration;

use shmlink::wire::{Descriptor, FrameHeader, Kind, CAPS, CAP_DESCRIPTORS, CAP_FDS};
use shmlink::{ClientOptions, Error, ServerOptions};
use support::raw::{hello, RawSession};
use support::{connect, start, watchdog, xform, xform_into, Rng, LIMIT, T};

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

fn tcp_refuses_loans() {
    let srv = start(T::Tcp, server_opts(), echo());
    let mut c = connect(&srv.addr, opts());
    let e = c.loan(1 << 20).expect_err("tcp");
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let req = vec![1u8; 1 << 20];
    assert_eq!(c.call(&req).expect("streams"), xform(&req));
}

macro_rules! arena_tests {
    ($($name:ident),*) => {
        mod shm { $( #[test] fn $name() { super::support::watchdog(stringify!($name), super::LIMIT, || super::$name(super::T::Shm)); } )* }
        mod unix { $( #[test] fn $name() { super::support::watchdog(stringify!($name), super::LIMIT, || super::$name(super::T::Unix)); } )* }
    };
}

arena_tests!(
    large_calls_go_through_the_arena,
    a_loan_is_filled_in_place,
    a_full_arena_is_reported_and_calls_stream,
    refused_where_not_agreed,
    a_descriptor_naming_no_segment_ends_the_session
);

#[test]
fn tcp() {
    watchdog("tcp", LIMIT, tcp_refuses_loans);
}

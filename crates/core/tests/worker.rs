//! Workers and worker ports over every transport: a worker connects to a
//! port and answers the calls of whoever accepted it; errors and panics of
//! its handler reach the caller; a goodbye from the caller ends its loop;
//! clients and workers knock on the wrong doors and are refused; a hostile
//! worker (written by hand) cannot harm its caller or the port.

mod support;

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use shmlink::wire::{FrameHeader, Kind, CAP_SERVE, RECORD_HEADER, TAG_DATA};
use shmlink::{
    Client, ClientOptions, Error, RefusalCode, RemoteError, ServerOptions, Worker, WorkerPort,
    CODE_HANDLER_PANICKED, CODE_NOT_ANSWERED,
};
use support::raw::*;
use support::*;

fn port(t: T) -> (WorkerPort, TempDir) {
    let dir = TempDir::new("port");
    let p = WorkerPort::bind(&t.bind_addr(&dir, "w"), ServerOptions::default()).expect("bind");
    (p, dir)
}

fn handler(req: &[u8], resp: &mut Vec<u8>) -> Result<(), RemoteError> {
    match req {
        b"fail" => Err(RemoteError::new(42, "asked to fail")),
        b"panic" => panic!("asked to panic"),
        _ => {
            resp.extend_from_slice(b"w:");
            resp.extend_from_slice(req);
            Ok(())
        }
    }
}

crate::per_transport!(
    a_worker_answers_until_told_to_stop,
    the_calls_of_a_worker_loop_by_hand,
    wrong_doors_are_refused,
    hostile_workers_cannot_harm_their_caller,
);

fn a_worker_answers_until_told_to_stop(t: T) {
    let (port, _dir) = port(t);
    let addr = port.address().to_string();
    let worker = thread::spawn(move || {
        let mut w = Worker::connect(&addr, ClientOptions::default()).expect("worker connects");
        w.run(handler)
    });
    let mut accepted = port
        .accept(Duration::from_secs(5))
        .expect("accept")
        .expect("a worker came");
    assert_eq!(accepted.pid, (t != T::Tcp).then(std::process::id));
    let c = &mut accepted.client;
    for i in 0..100u32 {
        let req = format!("call {i}");
        assert_eq!(
            c.call(req.as_bytes()).expect("call"),
            format!("w:{req}").as_bytes()
        );
    }
    let big = vec![9u8; 3 << 20];
    let got = c.call(&big).expect("a chunked call both ways");
    assert_eq!((got.len(), &got[..2]), (big.len() + 2, &b"w:"[..]));
    match c.call(b"fail") {
        Err(Error::Remote(r)) => assert_eq!((r.code, r.message.as_str()), (42, "asked to fail")),
        other => panic!("{t:?}: {other:?}"),
    }
    match c.call(b"panic") {
        Err(Error::Remote(r)) => {
            assert_eq!(r.code, CODE_HANDLER_PANICKED);
            assert!(r.message.contains("asked to panic"), "{}", r.message);
        }
        other => panic!("{t:?}: {other:?}"),
    }
    assert_eq!(c.call(b"after").expect("the worker goes on"), b"w:after");
    drop(accepted);
    let ran = worker.join().expect("worker thread");
    assert!(
        ran.is_ok(),
        "{t:?}: run ends cleanly on the goodbye: {ran:?}"
    );
    assert!(port
        .accept(Duration::from_millis(50))
        .expect("accept")
        .is_none());
}

fn the_calls_of_a_worker_loop_by_hand(t: T) {
    let (port, _dir) = port(t);
    let addr = port.address().to_string();
    let worker = thread::spawn(move || {
        let mut w = Worker::connect(&addr, ClientOptions::default()).expect("worker connects");
        assert!(matches!(
            w.respond(b"early"),
            Err(Error::NothingInFlight { .. })
        ));
        let first = w.accept().expect("accept").expect("a call").to_vec();
        assert_eq!(first, b"one");
        w.respond(b"1").expect("respond");
        assert_eq!(w.accept().expect("accept").expect("a call"), b"two");
        w.fail(7, "no").expect("fail");
        assert_eq!(w.accept().expect("accept").expect("a call"), b"three");
        // Not answered: the next accept answers it with CODE_NOT_ANSWERED.
        assert_eq!(w.accept().expect("accept").expect("a call"), b"four");
        w.respond(b"4").expect("respond");
        assert!(w.accept().expect("accept").is_none(), "told to stop");
    });
    let mut a = port
        .accept(Duration::from_secs(5))
        .expect("accept")
        .expect("a worker");
    assert_eq!(a.client.call(b"one").expect("one"), b"1");
    assert!(matches!(a.client.call(b"two"), Err(Error::Remote(r)) if r.code == 7));
    assert!(
        matches!(a.client.call(b"three"), Err(Error::Remote(r)) if r.code == CODE_NOT_ANSWERED)
    );
    assert_eq!(a.client.call(b"four").expect("four"), b"4");
    drop(a);
    worker.join().expect("worker thread");
}

fn wrong_doors_are_refused(t: T) {
    let (port, _dir) = port(t);
    let addr = port.address().to_string();
    let knock = thread::spawn(move || Client::connect(&addr, ClientOptions::default()));
    assert!(port
        .accept(Duration::from_millis(300))
        .expect("accept")
        .is_none());
    match knock.join().expect("client thread") {
        Err(Error::Refused {
            code: RefusalCode::BadRequest,
            message,
            ..
        }) => assert!(message.contains("takes workers only"), "{message}"),
        other => panic!("{t:?}: a client at a worker port: {other:?}"),
    }
    assert_eq!(port.refused(), 1);
    let srv = start(t, ServerOptions::default(), handler);
    match Worker::connect(&srv.addr, ClientOptions::default()) {
        Err(Error::Refused {
            code: RefusalCode::BadRequest,
            message,
            ..
        }) => assert!(
            message.contains("workers connect to a worker port"),
            "{message}"
        ),
        other => panic!("{t:?}: a worker at a server: {other:?}"),
    }
}

#[test]
fn a_worker_without_an_address_says_why() {
    std::env::remove_var(shmlink::WORKER_ENV);
    match Worker::from_env(ClientOptions::default()) {
        Err(Error::InvalidOption { name, reason }) => {
            assert_eq!(name, "SHMLINK_WORKER");
            assert!(reason.contains("shmlink pool"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// What a hostile worker answers a call with.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Attack {
    /// A response to a call that was never made.
    WrongId,
    /// A frame kind the protocol does not have.
    UnknownKind,
    /// A frame carrying more bytes than its message.
    LenOverTotal,
    /// An error frame too short for its code.
    ShortErrorBody,
    /// A response announcing more than the caller's largest message.
    HugeTotal,
    /// A request: the worker side never calls.
    RequestBack,
    /// The first chunk of a response, then nothing.
    Truncated,
    /// Over `shm:`: a ring tail beyond anything written.
    TailBeyondRing,
    /// Over `shm:`: a record with an unknown tag.
    BadRecordTag,
    /// Over `shm:`: a record longer than the ring.
    RecordLongerThanRing,
}

const ATTACKS: [Attack; 10] = [
    Attack::WrongId,
    Attack::UnknownKind,
    Attack::LenOverTotal,
    Attack::ShortErrorBody,
    Attack::HugeTotal,
    Attack::RequestBack,
    Attack::Truncated,
    Attack::TailBeyondRing,
    Attack::BadRecordTag,
    Attack::RecordLongerThanRing,
];

fn attack(w: &mut RawSession, how: Attack, id: u64) {
    let ring_tail = |w: &RawSession| {
        let (p, _) = w.rings.as_ref().expect("shm rings");
        let tail = p.header().tail.load(Ordering::Acquire);
        (tail, p.capacity() as u64)
    };
    match how {
        Attack::WrongId => w.send(FrameHeader::whole(Kind::Response, id + 7, 3), b"bad"),
        Attack::UnknownKind => w.send_raw(raw_header(99, 0, id, 3, 3), b"bad"),
        Attack::LenOverTotal => w.send_raw(raw_header(Kind::Response as u8, 0, id, 8, 3), &[1; 8]),
        Attack::ShortErrorBody => w.send(FrameHeader::whole(Kind::Error, id, 2), &[1, 2]),
        Attack::HugeTotal => w.send_raw(
            raw_header(Kind::Response as u8, 1, id, 4, u64::MAX / 2),
            &[1; 4],
        ),
        Attack::RequestBack => w.send(FrameHeader::whole(Kind::Request, 1, 3), b"hey"),
        Attack::Truncated => w.send_raw(raw_header(Kind::Response as u8, 1, id, 4, 8), &[1; 4]),
        Attack::TailBeyondRing => {
            let (tail, cap) = ring_tail(w);
            let (p, _) = w.rings.as_ref().expect("shm rings");
            p.header().tail.store(tail + 4 * cap, Ordering::Release);
            ring_data_bell(p.header());
        }
        Attack::BadRecordTag | Attack::RecordLongerThanRing => {
            let (tail, cap) = ring_tail(w);
            let (len, tag) = if how == Attack::BadRecordTag {
                (32u32, 0x6261_6421)
            } else {
                (cap as u32 * 2, TAG_DATA)
            };
            let mut rec = [0u8; RECORD_HEADER];
            rec[..4].copy_from_slice(&len.to_le_bytes());
            rec[4..].copy_from_slice(&tag.to_le_bytes());
            w.write_out(tail % cap, &rec);
            let (p, _) = w.rings.as_ref().expect("shm rings");
            p.header()
                .tail
                .store(tail + RECORD_HEADER as u64 + 32, Ordering::Release);
            ring_data_bell(p.header());
        }
    }
}

fn hostile_workers_cannot_harm_their_caller(t: T) {
    let (port, _dir) = port(t);
    let addr = port.address().to_string();
    let mut h = hello(t);
    h.caps |= CAP_SERVE;
    for how in ATTACKS {
        if t != T::Shm
            && matches!(
                how,
                Attack::TailBeyondRing | Attack::BadRecordTag | Attack::RecordLongerThanRing
            )
        {
            continue; // ring attacks need a ring
        }
        let a = addr.clone();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let hostile = thread::spawn(move || {
            let (welcome, w) = RawSession::open(&a, &h);
            let mut w = w.unwrap_or_else(|| panic!("the port accepts the worker: {welcome:?}"));
            let (req, body) = w.recv().expect("a call reaches the worker");
            assert_eq!((req.kind, body.as_slice()), (Kind::Request, &b"call"[..]));
            attack(&mut w, how, req.id);
            // Kept open: the caller must not need the socket to close.
            let _ = done_rx.recv();
            drop(w);
        });
        let mut acc = port
            .accept(Duration::from_secs(5))
            .expect("accept")
            .expect("the hostile worker");
        let t0 = Instant::now();
        let got = acc.client.call_timeout(b"call", Duration::from_secs(2));
        let took = t0.elapsed();
        match (&got, how) {
            (Err(Error::Timeout { .. }), Attack::Truncated) => {}
            (Err(Error::Protocol { .. }), _) => {}
            other => panic!("{t:?} {how:?}: the caller got {other:?}"),
        }
        assert!(
            took < Duration::from_secs(3),
            "{t:?} {how:?}: took {took:?}"
        );
        assert!(
            acc.client
                .call_timeout(b"again", Duration::from_secs(1))
                .is_err(),
            "{t:?} {how:?}: a session a worker broke is not used again"
        );
        drop(acc);
        let _ = done_tx.send(());
        hostile.join().expect("the hostile worker's thread");
    }
    // The port still takes honest workers.
    let good = thread::spawn(move || {
        let mut w = Worker::connect(&addr, ClientOptions::default()).expect("worker connects");
        w.run(handler)
    });
    let mut a = port
        .accept(Duration::from_secs(5))
        .expect("accept")
        .expect("an honest worker");
    assert_eq!(a.client.call(b"fine").expect("call"), b"w:fine");
    drop(a);
    good.join()
        .expect("worker thread")
        .expect("run ends cleanly");
}

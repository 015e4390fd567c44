//! Workers and worker ports over every transport: a worker connects to a
//! port and answers the calls of whoever accepted it; errors and panics of
//! its handler reach the caller; a goodbye from the caller ends its loop;
//! clients and workers knock on the wrong doors and are refused.

mod support;

use std::thread;
use std::time::Duration;

use shmlink::{
    Client, ClientOptions, Error, RefusalCode, RemoteError, ServerOptions, Worker, WorkerPort,
    CODE_HANDLER_PANICKED, CODE_NOT_ANSWERED,
};
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

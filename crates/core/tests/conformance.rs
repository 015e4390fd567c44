//! The behaviour suite, written once and run for every transport: each
//! behaviour `fn x(t: T)` becomes `shm::x`, `unix::x` and `tcp::x`.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use shmlink::{
    Client, ClientOptions, Error, RefusalCode, RemoteError, Server, ServerOptions, WaitStrategy,
    CODE_HANDLER_PANICKED, CODE_RESPONSE_TOO_LARGE,
};
use support::*;

crate::per_transport!(
    round_trip_sizes,
    large_responses,
    pipelining_100,
    call_while_pipelined,
    one_way_messages_keep_order,
    handler_error_is_remote,
    handler_panic_is_remote,
    oversize_request_refused_before_sending,
    response_too_large_for_client,
    response_too_large_for_the_server,
    timeout_then_own_answer,
    back_pressure_times_out_without_loss,
    many_sessions,
    max_sessions_refuses_extra,
    graceful_stop_answers_in_flight,
    invalid_addresses_and_options,
    connect_to_missing_server,
    stats_count_sessions,
);

fn echo(req: &[u8], resp: &mut Vec<u8>) -> Result<(), RemoteError> {
    xform_into(req, resp);
    Ok(())
}

/// A request tagged with its index: 8-byte index then pseudo-random bytes.
fn tagged(i: u64, len: usize) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    let mut r = Rng::new(i.wrapping_mul(7919) + len as u64);
    v.extend(r.bytes(len));
    v
}

fn round_trip_sizes(t: T) {
    let srv = start(t, ServerOptions::default(), echo);
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(30)));
    assert!(c.is_connected());
    let mut rng = Rng::new(1);
    for size in [0usize, 1, 7, 8, 64, 2048, 65535, 65536, 1 << 20, 5 << 20] {
        let req = rng.bytes(size);
        let t0 = Instant::now();
        let resp = c
            .call(&req)
            .unwrap_or_else(|e| panic!("{t:?}: call of {size} bytes: {e}"));
        assert_bytes(&format!("{t:?} size {size}"), &resp, &xform(&req));
        if size >= 1 << 20 {
            eprintln!("{t:?}: {size} bytes round trip in {:?}", t0.elapsed());
        }
    }
    // And again in reverse order on the same session (ring positions differ).
    for size in [5 << 20, 65536, 65535, 7, 0] {
        let req = rng.bytes(size);
        let resp = c
            .call(&req)
            .unwrap_or_else(|e| panic!("{t:?}: {size}: {e}"));
        assert_bytes(&format!("{t:?} size {size} (2nd)"), &resp, &xform(&req));
    }
    assert_eq!(c.in_flight(), 0);
}

/// Small requests, large responses (server-to-client streaming).
fn large_responses(t: T) {
    let srv = start(
        t,
        ServerOptions::default(),
        |req: &[u8], resp: &mut Vec<u8>| {
            let n = u64::from_le_bytes(req[..8].try_into().unwrap_or([0; 8])) as usize;
            resp.extend((0..n).map(|i| (i.wrapping_mul(31) ^ (i >> 11)) as u8));
            Ok(())
        },
    );
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(30)));
    for n in [0usize, 65536, 100_003, 1 << 20, 5 << 20] {
        let resp = c
            .call(&(n as u64).to_le_bytes())
            .unwrap_or_else(|e| panic!("{t:?}: response of {n}: {e}"));
        let want: Vec<u8> = (0..n)
            .map(|i| (i.wrapping_mul(31) ^ (i >> 11)) as u8)
            .collect();
        assert_bytes(&format!("{t:?} response {n}"), &resp, &want);
    }
}

fn pipelining_100(t: T) {
    let srv = start(t, ServerOptions::default(), echo);
    let mut c = connect(&srv.addr, ClientOptions::default());
    let mut expected = HashMap::new();
    for i in 0..100u64 {
        let req = tagged(i, 10 + (i as usize * 37) % 300);
        let id = c
            .send(&req)
            .unwrap_or_else(|e| panic!("{t:?}: send {i}: {e}"));
        assert!(expected.insert(id, xform(&req)).is_none(), "id {id} reused");
    }
    assert_eq!(c.in_flight(), 100);
    for k in 0..100 {
        let r = c.recv().unwrap_or_else(|e| panic!("{t:?}: recv #{k}: {e}"));
        let want = expected
            .remove(&r.id)
            .unwrap_or_else(|| panic!("{t:?}: reply for unknown or repeated id {}", r.id));
        let got = r
            .result
            .unwrap_or_else(|e| panic!("{t:?}: id {}: {e}", r.id));
        assert_bytes(&format!("{t:?} reply id {}", r.id), &got, &want);
    }
    assert!(expected.is_empty());
    assert_eq!(c.in_flight(), 0);
    match c.recv_timeout(Duration::from_millis(100)) {
        Err(Error::NothingInFlight { .. }) => {}
        other => panic!("{t:?}: recv with nothing in flight: {other:?}"),
    }
}

fn call_while_pipelined(t: T) {
    let srv = start(t, ServerOptions::default(), echo);
    let mut c = connect(&srv.addr, ClientOptions::default());
    let mut expected = HashMap::new();
    for r in [&b"a-1"[..], b"b-2", b"c-3"] {
        expected.insert(c.send(r).expect("send"), xform(r));
    }
    let got = c.call(b"x-call").expect("call while 3 in flight");
    assert_bytes("call answer", &got, &xform(b"x-call"));
    assert_eq!(
        c.in_flight(),
        3,
        "the three pipelined calls are still pending"
    );
    expected.insert(c.send(b"d-4").expect("send"), xform(b"d-4"));
    let got = c.call(b"y-call-longer").expect("second call");
    assert_bytes("second call answer", &got, &xform(b"y-call-longer"));
    let got = c.call(&[]).expect("empty call");
    assert!(got.is_empty());
    assert_eq!(c.in_flight(), 4);
    for _ in 0..4 {
        let r = c.recv().expect("recv");
        let want = expected.remove(&r.id).expect("known id");
        assert_eq!(r.result, Ok(want), "{t:?}: reply {}", r.id);
    }
    assert_eq!(c.in_flight(), 0);
}

fn one_way_messages_keep_order(t: T) {
    let seen = Arc::new(Mutex::new(Vec::<u32>::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let (s2, c2) = (Arc::clone(&seen), Arc::clone(&count));
    let srv = start(
        t,
        ServerOptions::default(),
        move |req: &[u8], resp: &mut Vec<u8>| {
            if let Some(rest) = req.strip_prefix(b"note:") {
                c2.fetch_add(1, Ordering::SeqCst);
                let i = u32::from_le_bytes(rest[..4].try_into().expect("index"));
                s2.lock().expect("lock").push(i);
                resp.extend_from_slice(b"ignored");
            } else if req == b"count" {
                resp.extend_from_slice(&(c2.load(Ordering::SeqCst) as u64).to_le_bytes());
            } else {
                xform_into(req, resp);
            }
            Ok(())
        },
    );
    let mut c = connect(&srv.addr, ClientOptions::default());
    let note = |i: u32, extra: usize| {
        let mut v = b"note:".to_vec();
        v.extend_from_slice(&i.to_le_bytes());
        v.extend(std::iter::repeat_n(0xEEu8, extra));
        v
    };
    for i in 0..50 {
        c.notify(&note(i, i as usize)).expect("notify");
    }
    assert_eq!(c.in_flight(), 0, "one-way messages are not in flight");
    let n = c.call(b"count").expect("count");
    assert_eq!(u64::from_le_bytes(n[..].try_into().expect("8 bytes")), 50);
    // Mixed with pipelined calls, and a large (chunked) one-way message.
    let id = c.send(b"hello").expect("send");
    for i in 50..60 {
        c.notify(&note(i, 0)).expect("notify");
    }
    c.notify(&note(60, 300_000)).expect("large notify");
    let id2 = c.send(b"count").expect("send count");
    let r1 = c.recv().expect("recv");
    assert_eq!((r1.id, r1.result), (id, Ok(xform(b"hello"))));
    let r2 = c.recv().expect("recv");
    assert_eq!(r2.id, id2);
    assert_eq!(r2.result, Ok(61u64.to_le_bytes().to_vec()));
    let order = seen.lock().expect("lock").clone();
    assert_eq!(order, (0..61).collect::<Vec<u32>>(), "one-way order");
    assert_eq!(count.load(Ordering::SeqCst), 61);
}

fn handler_error_is_remote(t: T) {
    let srv = start(
        t,
        ServerOptions::default(),
        |req: &[u8], resp: &mut Vec<u8>| {
            if let Some(what) = req.strip_prefix(b"fail:") {
                return Err(RemoteError::new(
                    42,
                    format!("refused {}", String::from_utf8_lossy(what)),
                ));
            }
            xform_into(req, resp);
            Ok(())
        },
    );
    let mut c = connect(&srv.addr, ClientOptions::default());
    match c.call(b"fail:abc") {
        Err(Error::Remote(r)) => {
            assert_eq!(r, RemoteError::new(42, "refused abc"));
        }
        other => panic!("{t:?}: expected Remote, got {other:?}"),
    }
    assert!(c.is_connected());
    assert_eq!(c.call(b"ok").expect("after error"), xform(b"ok"));
    let id = c.send(b"fail:piped").expect("send");
    let ok = c.send(b"fine").expect("send");
    let r = c.recv().expect("recv");
    assert_eq!(r.id, id);
    assert_eq!(r.result, Err(RemoteError::new(42, "refused piped")));
    let r = c.recv().expect("recv");
    assert_eq!((r.id, r.result), (ok, Ok(xform(b"fine"))));
    let e = c.call(b"fail:x").expect_err("error");
    assert!(!e.is_fatal(), "a remote error is not fatal: {e}");
    wait_until("errors counted", Duration::from_secs(2), || {
        srv.stats().errors.load(Ordering::Relaxed) >= 3
    });
}

fn handler_panic_is_remote(t: T) {
    let srv = start(
        t,
        ServerOptions::default(),
        |req: &[u8], resp: &mut Vec<u8>| {
            if req == b"panic" {
                panic!("deliberate test panic {}", 7);
            }
            xform_into(req, resp);
            Ok(())
        },
    );
    let mut c = connect(&srv.addr, ClientOptions::default());
    for round in 0..2 {
        match c.call(b"panic") {
            Err(Error::Remote(r)) => {
                assert_eq!(r.code, CODE_HANDLER_PANICKED, "{t:?}: {r:?}");
                assert!(
                    r.message.contains("deliberate test panic 7"),
                    "{t:?}: message {:?}",
                    r.message
                );
            }
            other => panic!("{t:?}: round {round}: expected Remote, got {other:?}"),
        }
        for i in 0..3u8 {
            assert_eq!(c.call(&[i; 10]).expect("after panic"), xform(&[i; 10]));
        }
    }
    assert!(c.is_connected());
    assert_eq!(srv.stats().active_sessions(), 1);
}

fn oversize_request_refused_before_sending(t: T) {
    let srv = start(
        t,
        ServerOptions {
            max_message_size: 2000,
            ..Default::default()
        },
        echo,
    );
    let mut c = connect(&srv.addr, ClientOptions::default());
    assert_eq!(c.max_request(), 2000);
    match c.call(&[1u8; 2001]) {
        Err(Error::MessageTooLarge { size, max, .. }) => assert_eq!((size, max), (2001, 2000)),
        other => panic!("{t:?}: expected MessageTooLarge, got {other:?}"),
    }
    match c.send(&[0u8; 5000]) {
        Err(e @ Error::MessageTooLarge { .. }) => assert!(!e.is_fatal()),
        other => panic!("{t:?}: send: expected MessageTooLarge, got {other:?}"),
    }
    assert!(matches!(
        c.notify(&vec![0u8; 1 << 20]),
        Err(Error::MessageTooLarge { .. })
    ));
    assert_eq!(c.in_flight(), 0, "nothing was sent");
    assert_eq!(
        c.call(&[2u8; 2000]).expect("exactly the limit"),
        xform(&[2u8; 2000])
    );
    assert_eq!(c.call(b"small").expect("small"), xform(b"small"));
    wait_until("calls counted", Duration::from_secs(2), || {
        srv.stats().calls.load(Ordering::Relaxed) == 2
    });
    assert_eq!(
        srv.stats().calls.load(Ordering::Relaxed),
        2,
        "the oversize calls never reached the server"
    );
    // The client's own limit binds too, when it is the lower one.
    let mut small = connect(
        &srv.addr,
        ClientOptions {
            max_message_size: 1024,
            ..ClientOptions::default()
        },
    );
    match small.call(&[3u8; 1025]) {
        Err(Error::MessageTooLarge { size, max, .. }) => assert_eq!((size, max), (1025, 1024)),
        other => panic!("{t:?}: client limit: expected MessageTooLarge, got {other:?}"),
    }
    assert_eq!(
        small.call(&[4u8; 1024]).expect("at the client's limit"),
        xform(&[4u8; 1024])
    );
}

fn response_too_large_for_client(t: T) {
    let srv = start(
        t,
        ServerOptions::default(),
        |req: &[u8], resp: &mut Vec<u8>| {
            let n: usize = std::str::from_utf8(req)
                .ok()
                .and_then(|s| s.strip_prefix("len:"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            resp.resize(n, 7);
            Ok(())
        },
    );
    let mut c = connect(
        &srv.addr,
        ClientOptions {
            max_message_size: 2000,
            ..Default::default()
        },
    );
    for n in [2001usize, 5 << 20] {
        match c.call(format!("len:{n}").as_bytes()) {
            Err(Error::Remote(r)) => {
                assert_eq!(r.code, CODE_RESPONSE_TOO_LARGE, "{t:?}: {r:?}");
                assert!(
                    r.message.contains(&n.to_string()) && r.message.contains("2000"),
                    "{t:?}: message should name both sizes: {:?}",
                    r.message
                );
            }
            other => panic!("{t:?}: expected Remote(RESPONSE_TOO_LARGE) for {n}, got {other:?}"),
        }
    }
    assert_eq!(c.call(b"len:2000").expect("at the limit"), vec![7u8; 2000]);
    assert!(c.is_connected());
}

/// A handler's response over the server's own limit (smaller than the
/// client's) is the same remote error, naming the server's limit; the session
/// goes on. (It used to end the session: found by the Go binding.)
fn response_too_large_for_the_server(t: T) {
    let srv = start(
        t,
        ServerOptions {
            max_message_size: 3000,
            ..ServerOptions::default()
        },
        |req: &[u8], resp: &mut Vec<u8>| {
            resp.resize(usize::from(req[0]) * 1000, 7);
            Ok(())
        },
    );
    let mut c = connect(&srv.addr, ClientOptions::default());
    match c.call(&[4]) {
        Err(Error::Remote(r)) => {
            assert_eq!(r.code, CODE_RESPONSE_TOO_LARGE, "{t:?}: {r:?}");
            assert!(
                r.message.contains("4000")
                    && r.message
                        .contains("this server's maximum message size of 3000"),
                "{t:?}: {:?}",
                r.message
            );
        }
        other => panic!("{t:?}: expected Remote(RESPONSE_TOO_LARGE), got {other:?}"),
    }
    assert_eq!(c.call(&[3]).expect("at the limit"), vec![7u8; 3000]);
    assert!(c.is_connected());
}

fn timeout_then_own_answer(t: T) {
    let gate = Arc::new(Gate::closed());
    let g = Arc::clone(&gate);
    let srv = start(
        t,
        ServerOptions::default(),
        move |req: &[u8], resp: &mut Vec<u8>| {
            if req.starts_with(b"slow") {
                g.pass();
            }
            xform_into(req, resp);
            Ok(())
        },
    );
    let _release = OpenOnDrop(Arc::clone(&gate));
    let mut c = connect(&srv.addr, ClientOptions::default());
    let t0 = Instant::now();
    match c.call_timeout(b"slow-1", Duration::from_millis(200)) {
        Err(e @ Error::Timeout { .. }) => assert!(!e.is_fatal(), "a timeout is not fatal"),
        other => panic!("{t:?}: expected Timeout, got {other:?}"),
    }
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(200),
        "timed out early: {took:?}"
    );
    assert!(
        took < Duration::from_secs(2),
        "timeout far too late: {took:?}"
    );
    assert!(
        gate.wait_entered(1, Duration::from_secs(5)),
        "request reached the handler"
    );
    assert_eq!(c.in_flight(), 0, "a timed-out call is no longer in flight");
    // Release the late answer while (or before) the next call waits: either
    // way the next call must get its own answer.
    let g2 = Arc::clone(&gate);
    let opener = thread::spawn(move || g2.open());
    let got = c
        .call_timeout(b"fast-2", Duration::from_secs(10))
        .expect("fast-2");
    assert_bytes("fast-2 answer", &got, &xform(b"fast-2"));
    opener.join().expect("opener");
    let id = c.send(b"fast-3").expect("send");
    let r = c.recv().expect("recv");
    assert_eq!((r.id, r.result), (id, Ok(xform(b"fast-3"))));
    assert!(matches!(
        c.recv_timeout(Duration::from_millis(50)),
        Err(Error::NothingInFlight { .. })
    ));

    // Two abandoned calls queued behind each other, then a fresh one.
    gate.close();
    let before = gate.entered();
    for r in [&b"slow-4"[..], b"slow-5"] {
        assert!(matches!(
            c.call_timeout(r, Duration::from_millis(100)),
            Err(Error::Timeout { .. })
        ));
    }
    assert!(gate.wait_entered(before + 1, Duration::from_secs(5)));
    gate.open();
    let got = c.call(b"fast-6").expect("fast-6");
    assert_bytes("fast-6 answer", &got, &xform(b"fast-6"));
    let got = c.call(b"fast-7").expect("fast-7");
    assert_bytes("fast-7 answer", &got, &xform(b"fast-7"));
    assert_eq!(c.in_flight(), 0);
}

fn back_pressure_times_out_without_loss(t: T) {
    let gate = Arc::new(Gate::closed());
    let g = Arc::clone(&gate);
    let srv = start(
        t,
        ServerOptions::default(),
        move |req: &[u8], resp: &mut Vec<u8>| {
            g.pass();
            xform_into(req, resp);
            Ok(())
        },
    );
    let _release = OpenOnDrop(Arc::clone(&gate));
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_millis(300)));
    let size = if t == T::Shm { 4000 } else { 32 * 1024 };
    let mut sent = HashMap::new();
    let err = loop {
        let i = sent.len() as u64;
        assert!(i < 100_000, "{t:?}: the sender never blocked");
        let req = tagged(i, size);
        match c.send(&req) {
            Ok(id) => {
                sent.insert(id, xform(&req));
            }
            Err(e) => break e,
        }
    };
    let n = sent.len();
    eprintln!("{t:?}: {n} requests of {size} bytes sent before back-pressure: {err}");
    assert!(
        matches!(err, Error::Timeout { .. }),
        "{t:?}: expected Timeout, got {err:?}"
    );
    assert!(!err.is_fatal());
    assert!(n > 0);
    assert!(
        c.is_connected(),
        "{t:?}: session still usable after a send timeout"
    );
    assert_eq!(c.in_flight(), n);
    gate.open();
    for k in 0..n {
        let r = c
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{t:?}: reply {k} of {n}: {e}"));
        let want = sent
            .remove(&r.id)
            .unwrap_or_else(|| panic!("{t:?}: unexpected reply id {}", r.id));
        let got = r.result.unwrap_or_else(|e| panic!("{t:?}: {e}"));
        assert_bytes(&format!("{t:?}: reply {}", r.id), &got, &want);
    }
    let got = c
        .call_timeout(b"after", Duration::from_secs(5))
        .expect("call after back-pressure");
    assert_bytes("after", &got, &xform(b"after"));
    assert_eq!(
        srv.stats().calls.load(Ordering::Relaxed),
        n as u64 + 1,
        "{t:?}: the server answered exactly the requests sent"
    );
}

fn many_sessions(t: T) {
    let srv = start(t, ServerOptions::default(), echo);
    const N: usize = 50;
    let connected = Arc::new(Barrier::new(N + 1));
    let go = Arc::new(Barrier::new(N + 1));
    let threads: Vec<_> = (0..N)
        .map(|k| {
            let (addr, connected, go) = (srv.addr.clone(), Arc::clone(&connected), Arc::clone(&go));
            thread::spawn(move || {
                let mut c = connect(&addr, opts_timeout(Duration::from_secs(20)));
                connected.wait();
                go.wait();
                for i in 0..20u64 {
                    let req = tagged(k as u64 * 1000 + i, (k * 13 + i as usize * 101) % 3000);
                    let got = c
                        .call(&req)
                        .unwrap_or_else(|e| panic!("client {k} call {i}: {e}"));
                    assert_bytes(&format!("client {k} call {i}"), &got, &xform(&req));
                }
            })
        })
        .collect();
    connected.wait();
    wait_until("50 active sessions", Duration::from_secs(10), || {
        srv.stats().active_sessions() == N as u64
    });
    go.wait();
    for th in threads {
        th.join().expect("client thread");
    }
    wait_until("sessions back to 0", Duration::from_secs(5), || {
        srv.stats().active_sessions() == 0
    });
    assert_eq!(srv.stats().calls.load(Ordering::Relaxed), N as u64 * 20);
}

fn max_sessions_refuses_extra(t: T) {
    let srv = start(
        t,
        ServerOptions {
            max_sessions: 2,
            ..Default::default()
        },
        echo,
    );
    let mut c1 = connect(&srv.addr, ClientOptions::default());
    let mut c2 = connect(&srv.addr, ClientOptions::default());
    assert_eq!(c1.call(b"1").expect("c1"), xform(b"1"));
    assert_eq!(c2.call(b"2").expect("c2"), xform(b"2"));
    match Client::connect(&srv.addr, ClientOptions::default()) {
        Err(Error::Refused { code, message, .. }) => {
            assert_eq!(code, RefusalCode::TooManySessions, "{message}");
            assert!(message.contains('2'), "message names the limit: {message}");
        }
        other => panic!("{t:?}: third connect: expected Refused, got {other:?}"),
    }
    assert!(srv.stats().refused.load(Ordering::Relaxed) >= 1);
    assert_eq!(c1.call(b"still").expect("c1 still served"), xform(b"still"));
    drop(c1);
    // Room again once the first session has ended.
    let mut c3 = None;
    wait_until(
        "a third session is accepted after one ended",
        Duration::from_secs(5),
        || match Client::connect(&srv.addr, ClientOptions::default()) {
            Ok(c) => {
                c3 = Some(c);
                true
            }
            Err(Error::Refused {
                code: RefusalCode::TooManySessions,
                ..
            }) => false,
            Err(e) => panic!("{t:?}: unexpected error: {e}"),
        },
    );
    let mut c3 = c3.expect("c3");
    assert_eq!(c3.call(b"3").expect("c3"), xform(b"3"));
    assert_eq!(c2.call(b"2b").expect("c2"), xform(b"2b"));
}

fn graceful_stop_answers_in_flight(t: T) {
    let gate = Arc::new(Gate::closed());
    let g = Arc::clone(&gate);
    let mut srv = start(
        t,
        ServerOptions::default(),
        move |req: &[u8], resp: &mut Vec<u8>| {
            g.pass();
            xform_into(req, resp);
            Ok(())
        },
    );
    let _release = OpenOnDrop(Arc::clone(&gate));
    let mut c = connect(&srv.addr, ClientOptions::default());
    let mut sent = HashMap::new();
    for i in 0..5u64 {
        let req = tagged(i, 100 + i as usize);
        sent.insert(c.send(&req).expect("send"), xform(&req));
    }
    assert!(
        gate.wait_entered(1, Duration::from_secs(5)),
        "first request in the handler"
    );
    let server = srv.take();
    let addr = srv.addr.clone();
    let path = socket_path(&addr);
    server.stop_handle().stop();
    if let Some(p) = &path {
        wait_until(
            "socket file removed once stopping",
            Duration::from_secs(5),
            || !p.exists(),
        );
    }
    let joiner = thread::spawn(move || {
        let t0 = Instant::now();
        let r = server.stop();
        (r, t0.elapsed())
    });
    gate.open();
    for k in 0..5 {
        let r = c
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{t:?}: in-flight reply {k}: {e}"));
        let want = sent.remove(&r.id).expect("known id");
        assert_eq!(r.result, Ok(want), "{t:?}: reply {}", r.id);
    }
    let (r, took) = joiner.join().expect("stop thread");
    r.expect("stop returns Ok");
    eprintln!("{t:?}: stop returned {took:?} after the gate opened");
    match c.call_timeout(b"after-stop", Duration::from_secs(5)) {
        Err(e) if is_gone_or_closed(&e) => {}
        other => panic!("{t:?}: call after stop: expected PeerGone/Closed, got {other:?}"),
    }
    assert!(!c.is_connected());
    if let Some(p) = &path {
        assert!(!p.exists(), "socket file {} must be removed", p.display());
    }
    match Client::connect(&addr, opts_timeout(Duration::from_secs(2))) {
        Err(Error::Connect { .. }) => {}
        other => panic!("{t:?}: connect after stop: expected Connect, got {other:?}"),
    }
}

fn invalid_addresses_and_options(t: T) {
    for bad in [
        "nope",
        "/tmp/x.sock",
        "shm:",
        "unix:",
        "udp:1.2.3.4:5",
        "tcp:host",
        "tcp::80",
        "tcp:127.0.0.1:99999",
        "tcp:127.0.0.1:port",
    ] {
        match Client::connect(bad, ClientOptions::default()) {
            Err(Error::InvalidAddress { address, reason }) => {
                assert_eq!(address, bad);
                assert!(!reason.is_empty());
            }
            other => panic!("{bad}: expected InvalidAddress, got {other:?}"),
        }
        assert!(
            matches!(
                Server::bind(&[bad], ServerOptions::default()),
                Err(Error::InvalidAddress { .. })
            ),
            "bind {bad}"
        );
    }
    let long = format!("{}:/{}", t.scheme(), "a".repeat(200));
    if t != T::Tcp {
        assert!(matches!(
            Client::connect(&long, ClientOptions::default()),
            Err(Error::InvalidAddress { .. })
        ));
    }
    // Options are checked before connecting, whatever the transport.
    let dir = TempDir::new("inv");
    let addr = match t {
        T::Tcp => "tcp:127.0.0.1:1".to_string(),
        _ => t.bind_addr(&dir, "none"),
    };
    let bad_client = [
        (
            "ring_size",
            ClientOptions {
                ring_size: 1000,
                ..Default::default()
            },
        ),
        (
            "ring_size",
            ClientOptions {
                ring_size: 2048,
                ..Default::default()
            },
        ),
        (
            "ring_size",
            ClientOptions {
                ring_size: 1 << 29,
                ..Default::default()
            },
        ),
        (
            "timeout",
            ClientOptions {
                timeout: Duration::ZERO,
                ..Default::default()
            },
        ),
        (
            "max_message_size",
            ClientOptions {
                max_message_size: 0,
                ..Default::default()
            },
        ),
    ];
    for (name, o) in bad_client {
        match Client::connect(&addr, o) {
            Err(Error::InvalidOption { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{t:?}: client option {name}: expected InvalidOption, got {other:?}"),
        }
    }
    let bind = t.bind_addr(&dir, "srv");
    let bad_server = [
        (
            "max_sessions",
            ServerOptions {
                max_sessions: 0,
                ..Default::default()
            },
        ),
        (
            "socket_mode",
            ServerOptions {
                socket_mode: Some(0o1777),
                ..Default::default()
            },
        ),
        (
            "timeout",
            ServerOptions {
                handshake_timeout: Duration::ZERO,
                ..Default::default()
            },
        ),
        (
            "timeout",
            ServerOptions {
                send_timeout: Duration::ZERO,
                ..Default::default()
            },
        ),
        (
            "max_message_size",
            ServerOptions {
                max_message_size: 0,
                ..Default::default()
            },
        ),
    ];
    for (name, o) in bad_server {
        match Server::bind(&[bind.as_str()], o) {
            Err(Error::InvalidOption { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{t:?}: server option {name}: expected InvalidOption, got {other:?}"),
        }
    }
    if let Some(p) = socket_path(&bind) {
        assert!(!p.exists(), "no socket file left behind by refused options");
    }
    let none: [&str; 0] = [];
    assert!(matches!(
        Server::bind(&none, ServerOptions::default()),
        Err(Error::InvalidOption { .. })
    ));
    // Wait strategies parse.
    assert_eq!(
        "sleep".parse::<WaitStrategy>().expect("sleep"),
        WaitStrategy::Sleep
    );
    assert_eq!(
        "busy".parse::<WaitStrategy>().expect("busy"),
        WaitStrategy::Busy
    );
    assert_eq!(
        "spin:7".parse::<WaitStrategy>().expect("spin:7"),
        WaitStrategy::Spin(Duration::from_micros(7))
    );
    assert!(matches!(
        "spin".parse::<WaitStrategy>(),
        Ok(WaitStrategy::Spin(_))
    ));
    for bad in ["nap", "spin:", "spin:x", "SPIN", ""] {
        assert!(
            matches!(
                bad.parse::<WaitStrategy>(),
                Err(Error::InvalidOption { .. })
            ),
            "{bad:?}"
        );
    }
}

fn connect_to_missing_server(t: T) {
    let dir = TempDir::new("miss");
    let addr = match t {
        T::Tcp => {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("probe port");
            let port = l.local_addr().expect("addr").port();
            drop(l);
            format!("tcp:127.0.0.1:{port}")
        }
        _ => t.bind_addr(&dir, "missing"),
    };
    match Client::connect(&addr, opts_timeout(Duration::from_secs(2))) {
        Err(e @ Error::Connect { .. }) => {
            assert!(
                e.to_string().contains(&addr),
                "message names the address: {e}"
            );
        }
        other => panic!("{t:?}: expected Connect, got {other:?}"),
    }
    if t != T::Tcp {
        // A directory that does not exist at all.
        let a = format!("{}:/nonexistent-shmlink-dir/x.sock", t.scheme());
        assert!(matches!(
            Client::connect(&a, ClientOptions::default()),
            Err(Error::Connect { .. })
        ));
    }
}

fn stats_count_sessions(t: T) {
    let srv = start(t, ServerOptions::default(), echo);
    let stats = srv.stats();
    assert_eq!(stats.active_sessions(), 0);
    let mut clients: Vec<Client> = (0..5)
        .map(|_| connect(&srv.addr, ClientOptions::default()))
        .collect();
    for (i, c) in clients.iter_mut().enumerate() {
        for _ in 0..=i {
            c.call(b"x").expect("call");
        }
    }
    wait_until("5 active sessions", Duration::from_secs(5), || {
        stats.active_sessions() == 5
    });
    assert_eq!(stats.sessions_opened.load(Ordering::Acquire), 5);
    assert_eq!(stats.calls.load(Ordering::Relaxed), 15);
    drop(clients.remove(0));
    wait_until("4 active sessions", Duration::from_secs(5), || {
        stats.active_sessions() == 4
    });
    drop(clients);
    let took = wait_until(
        "sessions back to 0 after clients dropped",
        Duration::from_secs(5),
        || stats.active_sessions() == 0,
    );
    eprintln!("{t:?}: sessions closed {took:?} after the clients dropped");
    assert_eq!(stats.sessions_closed.load(Ordering::Acquire), 5);
    assert_eq!(stats.refused.load(Ordering::Relaxed), 0);
    assert_eq!(stats.errors.load(Ordering::Relaxed), 0);
}

// ---- wait strategies (shm only: the other transports block in the kernel) ----

fn wait_strategies(server: WaitStrategy) {
    let srv = start(
        T::Shm,
        ServerOptions {
            wait: server,
            ..Default::default()
        },
        echo,
    );
    for client in ["sleep", "spin", "spin:0", "spin:5", "busy"] {
        let wait: WaitStrategy = client.parse().expect("strategy");
        let mut c = connect(
            &srv.addr,
            ClientOptions {
                wait,
                timeout: Duration::from_secs(20),
                ..Default::default()
            },
        );
        for i in 0..50u64 {
            let req = tagged(i, (i as usize * 97) % 500);
            let got = c
                .call(&req)
                .unwrap_or_else(|e| panic!("server {server} client {client}: {e}"));
            assert_bytes(
                &format!("server {server} client {client} call {i}"),
                &got,
                &xform(&req),
            );
        }
        let big = Rng::new(9).bytes(1 << 20);
        assert_bytes("1 MiB", &c.call(&big).expect("1 MiB"), &xform(&big));
        let mut sent = HashMap::new();
        for i in 0..20u64 {
            let req = tagged(i, 64);
            sent.insert(c.send(&req).expect("send"), xform(&req));
        }
        for _ in 0..20 {
            let r = c.recv().expect("recv");
            assert_eq!(Some(r.result.expect("ok")), sent.remove(&r.id));
        }
        // An idle gap long enough for both sides to fall asleep, then a call.
        assert!(matches!(
            c.call_timeout(b"", Duration::from_secs(5)),
            Ok(v) if v.is_empty()
        ));
    }
    wait_until("sessions closed", Duration::from_secs(5), || {
        srv.stats().active_sessions() == 0
    });
}

#[test]
fn shm_wait_server_sleep() {
    watchdog("shm_wait_server_sleep", LIMIT, || {
        wait_strategies(WaitStrategy::Sleep)
    });
}

#[test]
fn shm_wait_server_spin() {
    watchdog("shm_wait_server_spin", LIMIT, || {
        wait_strategies(WaitStrategy::default());
        wait_strategies(WaitStrategy::Spin(Duration::ZERO));
    });
}

#[test]
fn shm_wait_server_busy() {
    watchdog("shm_wait_server_busy", LIMIT, || {
        wait_strategies(WaitStrategy::Busy)
    });
}

/// A server bound on all three transports at once serves each of them.
#[test]
fn one_server_all_transports() {
    watchdog("one_server_all_transports", LIMIT, || {
        let dir = TempDir::new("all");
        let a = T::Shm.bind_addr(&dir, "a");
        let b = T::Unix.bind_addr(&dir, "b");
        let server = Server::bind(
            &[a.as_str(), b.as_str(), "tcp:127.0.0.1:0"],
            ServerOptions::default(),
        )
        .expect("bind")
        .spawn(echo)
        .expect("spawn");
        let addrs: Vec<String> = server.addresses().iter().map(|a| a.to_string()).collect();
        assert_eq!(addrs.len(), 3);
        assert_eq!(addrs[0], a);
        assert_eq!(addrs[1], b);
        assert!(
            addrs[2].starts_with("tcp:127.0.0.1:") && !addrs[2].ends_with(":0"),
            "{}",
            addrs[2]
        );
        for addr in &addrs {
            let mut c = connect(addr, ClientOptions::default());
            assert_eq!(
                c.call(addr.as_bytes()).expect("call"),
                xform(addr.as_bytes())
            );
        }
        server.stop().expect("stop");
        assert!(!socket_path(&a).expect("path").exists());
        assert!(!socket_path(&b).expect("path").exists());
    });
}

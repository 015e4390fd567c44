//! Sessions both of whose sides call (capability bit 10): a `Listener`'s
//! end pushes one-way messages to its client and calls it; the client
//! answers with its handler or through `next_incoming`/`answer`, also while
//! it waits for its own call (a call back in the middle of a call). Peers
//! of an older build (no bit 10) see today's behaviour; a `Server` does not
//! agree to the bit. Every transport; the last tests spawn processes and
//! kill one side in the middle of a call.

mod support;

use std::thread;
use std::time::Duration;

use shmlink::wire::frame::{FrameHeader, Kind};
use shmlink::{
    Accepted, Client, ClientOptions, Error, Listener, RemoteError, ServerOptions,
    CODE_HANDLER_PANICKED,
};
use support::child::Peer;
use support::raw::{hello, RawSession};
use support::{watchdog, TempDir, LIMIT, T};

const ROLE: &str = "SHMLINK_BOTH_WAYS_ROLE";
const SEC: Duration = Duration::from_secs(1);

/// A listener on `t` and a client connected to it: (listener's end, client).
fn pair(t: T, dir: &TempDir) -> (Listener, Accepted, Client) {
    let listener = Listener::bind(&t.bind_addr(dir, "l"), ServerOptions::default()).expect("bind");
    let addr = listener.address().to_string();
    let connecting = thread::spawn(move || Client::connect(&addr, ClientOptions::default()));
    let accepted = listener
        .accept(5 * SEC)
        .expect("accept")
        .expect("a client within 5 s");
    let client = connecting.join().expect("connect thread").expect("connect");
    (listener, accepted, client)
}

/// A hand-made client's session with `listener` (the hello `h`): the
/// listener's end and the raw end.
fn accept_raw(
    listener: Listener,
    addr: &str,
    h: &shmlink::wire::handshake::Hello,
) -> (Accepted, RawSession) {
    let accepting = thread::spawn(move || listener.accept(5 * SEC));
    let (_w, raw) = RawSession::open(addr, h);
    let s = accepting
        .join()
        .expect("accepting")
        .expect("accept")
        .expect("accepted");
    (s, raw.expect("an accepted session"))
}

#[test]
fn the_listener_pushes_and_calls_its_client() {
    watchdog("push", LIMIT, || {
        for t in T::ALL {
            let dir = TempDir::new("bw-push");
            let (_l, mut s, mut client) = pair(t, &dir);
            assert_eq!(s.pid, (t != T::Tcp).then(std::process::id), "{t:?}");
            client
                .on_call(|req: &[u8], resp: &mut Vec<u8>| {
                    resp.extend_from_slice(b"client says ");
                    resp.extend_from_slice(req);
                    Ok(())
                })
                .expect("the client takes calls from a listener");
            // Pushes arrive in order; the listener's calls are answered by
            // the client's handler while the client waits for them.
            for i in 0..100u32 {
                s.peer.notify(format!("push {i}").as_bytes()).expect("push");
            }
            let caller = thread::spawn(move || {
                let answers: Vec<Vec<u8>> = (0..50)
                    .map(|i| {
                        s.peer
                            .call(format!("q{i}").as_bytes())
                            .expect("call the client")
                    })
                    .collect();
                (s, answers)
            });
            for i in 0..100u32 {
                let m = client.next_incoming(5 * SEC).expect("a push");
                assert_eq!(m.id, None, "{t:?}: a one-way message has no id");
                assert_eq!(m.body, format!("push {i}").as_bytes(), "{t:?}");
            }
            // Served by the handler while waiting: nothing more comes out.
            let (mut s, answers) = loop {
                match client.next_incoming(Duration::from_millis(20)) {
                    Err(Error::Timeout { op, .. }) => {
                        assert!(op.contains("from the peer"), "{op}");
                    }
                    other => panic!("{t:?}: only calls, served by the handler: {other:?}"),
                }
                if caller.is_finished() {
                    break caller.join().expect("caller");
                }
            };
            for (i, a) in answers.iter().enumerate() {
                assert_eq!(a, format!("client says q{i}").as_bytes(), "{t:?}");
            }
            // And the client's own calls still reach the listener's end.
            let asking = thread::spawn(move || client.call(b"hello").map(|a| (client, a)));
            let m = s.peer.next_incoming(5 * SEC).expect("the client's call");
            let id = m.id.expect("a call has an id");
            s.peer.answer(id, Ok(b"hello back")).expect("answer");
            let (_client, a) = asking.join().expect("asking").expect("the client's call");
            assert_eq!(a, b"hello back");
            assert!(
                matches!(s.peer.answer(id, Ok(b"twice")), Err(Error::NotOwed { id: i, .. }) if i == id),
                "{t:?}: a call is answered once"
            );
        }
    });
}

#[test]
fn a_call_back_in_the_middle_of_a_call() {
    watchdog("call back", LIMIT, || {
        for t in T::ALL {
            let dir = TempDir::new("bw-back");
            let (_l, mut s, mut client) = pair(t, &dir);
            // The listener's end asks its caller for more input twice before
            // it answers the call.
            let serving = thread::spawn(move || {
                let m = s.peer.next_incoming(5 * SEC).expect("the call");
                let mut parts = m.body.clone();
                for _ in 0..2 {
                    parts.extend(s.peer.call(b"more?").expect("call back"));
                }
                s.peer
                    .answer(m.id.expect("a call"), Ok(&parts))
                    .expect("answer");
                s
            });
            let mut n = 0;
            client
                .on_call(move |req: &[u8], resp: &mut Vec<u8>| {
                    assert_eq!(req, b"more?");
                    n += 1;
                    resp.extend_from_slice(format!("+{n}").as_bytes());
                    Ok(())
                })
                .expect("handler");
            let answer = client.call(b"start").expect("the call");
            assert_eq!(answer, b"start+1+2", "{t:?}");
            serving.join().expect("serving");
        }
    });
}

#[test]
fn calls_taken_from_the_queue_are_answered_in_any_order() {
    watchdog("queue", LIMIT, || {
        for t in T::ALL {
            let dir = TempDir::new("bw-queue");
            let (_l, mut s, mut client) = pair(t, &dir);
            let ids: Vec<_> = (0..8u8).map(|i| s.peer.send(&[i]).expect("send")).collect();
            let mut got = Vec::new();
            for _ in 0..8 {
                let m = client.next_incoming(5 * SEC).expect("a call");
                got.push((m.id.expect("a call"), m.body));
            }
            // Answered in reverse; errors travel with their code.
            for (id, body) in got.iter().rev() {
                let r = if body[0] % 2 == 0 {
                    client.answer(*id, Ok(&[body[0] * 10]))
                } else {
                    client.answer(
                        *id,
                        Err(RemoteError::new(0x1000 + u32::from(body[0]), "odd")),
                    )
                };
                r.expect("answer");
            }
            let mut replies = Vec::new();
            for _ in 0..8 {
                replies.push(s.peer.recv().expect("reply"));
            }
            for (i, id) in ids.iter().enumerate() {
                let r = replies
                    .iter()
                    .find(|r| r.id == *id)
                    .expect("every call answered");
                match &r.result {
                    Ok(b) if i % 2 == 0 => assert_eq!(b, &[i as u8 * 10], "{t:?}"),
                    Err(e) if i % 2 == 1 => {
                        assert_eq!(e.code, 0x1000 + i as u32, "{t:?}");
                        assert_eq!(e.message, "odd");
                    }
                    other => panic!("{t:?}: call {i}: {other:?}"),
                }
            }
        }
    });
}

#[test]
fn handler_errors_panics_and_timeouts_reach_the_caller() {
    watchdog("errors", LIMIT, || {
        for t in T::ALL {
            let dir = TempDir::new("bw-err");
            let (_l, mut s, mut client) = pair(t, &dir);
            // No handler, nobody taking calls: the listener's call times
            // out, and its late answer is dropped, never given to another.
            let e = s
                .peer
                .call_timeout(b"late", Duration::from_millis(100))
                .expect_err("nobody answers");
            assert!(matches!(e, Error::Timeout { .. }), "{t:?}: {e}");
            let m = client.next_incoming(5 * SEC).expect("the late call");
            client
                .answer(m.id.expect("a call"), Ok(b"too late"))
                .expect("answer");
            client
                .on_call(|req: &[u8], resp: &mut Vec<u8>| match req {
                    b"fail" => Err(RemoteError::new(0x2222, "no such thing")),
                    b"panic" => panic!("boom"),
                    _ => {
                        resp.extend_from_slice(req);
                        Ok(())
                    }
                })
                .expect("handler");
            let serving = thread::spawn(move || {
                while client.next_incoming(Duration::from_millis(50)).is_err() {
                    if !client.is_connected() {
                        break;
                    }
                }
                client
            });
            match s.peer.call(b"fail") {
                Err(Error::Remote(r)) => {
                    assert_eq!(r.code, 0x2222, "{t:?}");
                    assert_eq!(r.message, "no such thing");
                }
                other => panic!("{t:?}: {other:?}"),
            }
            match s.peer.call(b"panic") {
                Err(Error::Remote(r)) => {
                    assert_eq!(r.code, CODE_HANDLER_PANICKED, "{t:?}");
                    assert!(r.message.contains("boom"), "{}", r.message);
                }
                other => panic!("{t:?}: {other:?}"),
            }
            assert_eq!(s.peer.call(b"fine").expect("after a panic"), b"fine");
            drop(s);
            let client = serving.join().expect("serving");
            assert!(!client.is_connected(), "{t:?}: the listener's end left");
        }
    });
}

#[test]
fn a_server_and_an_older_peer_see_todays_behaviour() {
    watchdog("older", LIMIT, || {
        for t in T::ALL {
            let dir = TempDir::new("bw-old");
            // A Server (handler threads) does not agree to bit 10.
            let srv = support::start(t, ServerOptions::default(), |r: &[u8], o: &mut Vec<u8>| {
                o.extend_from_slice(r);
                Ok(())
            });
            let mut c = Client::connect(&srv.addr, ClientOptions::default()).expect("connect");
            let e = c
                .on_call(|_: &[u8], _: &mut Vec<u8>| Ok(()))
                .expect_err("no bit 10");
            assert!(matches!(e, Error::NotAgreed { .. }), "{t:?}: {e}");
            let e = c.next_incoming(SEC).expect_err("no bit 10");
            assert!(e.to_string().contains("capability bit 10"), "{t:?}: {e}");
            assert_eq!(c.call(b"x").expect("calls as ever"), b"x");

            // A client of an older build (a hello without bit 10): the
            // listener's end answers it, and cannot call it.
            let listener =
                Listener::bind(&t.bind_addr(&dir, "l"), ServerOptions::default()).expect("bind");
            let addr = listener.address().to_string();
            let h = hello(t);
            let (mut s, mut raw) = accept_raw(listener, &addr, &h);
            let e = s.peer.call(b"hi").expect_err("no bit 10");
            assert!(
                matches!(&e, Error::NotAgreed { capability, .. } if capability.contains("older build")),
                "{t:?}: {e}"
            );
            assert!(s.peer.notify(b"hi").is_err(), "{t:?}: no push either");
            raw.send(FrameHeader::whole(Kind::Request, 7, 3), b"abc");
            let m = s.peer.next_incoming(5 * SEC).expect("its call");
            assert_eq!((m.id, m.body.as_slice()), (Some(7), &b"abc"[..]));
            s.peer.answer(7, Ok(b"cba")).expect("answer");
            let (h, body) = raw.recv().expect("the answer");
            assert_eq!(
                (h.kind, h.id, body.as_slice()),
                (Kind::Response, 7, &b"cba"[..])
            );
        }
    });
}

#[test]
fn a_response_to_no_call_ends_the_session() {
    watchdog("forged", LIMIT, || {
        for t in T::ALL {
            let dir = TempDir::new("bw-forged");
            let listener =
                Listener::bind(&t.bind_addr(&dir, "l"), ServerOptions::default()).expect("bind");
            let addr = listener.address().to_string();
            let mut h = hello(t);
            h.caps |= shmlink::wire::handshake::CAP_BOTH_WAYS;
            let (mut s, mut raw) = accept_raw(listener, &addr, &h);
            raw.send(FrameHeader::whole(Kind::Response, 99, 2), b"no");
            let e = s.peer.next_incoming(5 * SEC).expect_err("a forged answer");
            assert!(matches!(e, Error::Protocol { .. }), "{t:?}: {e}");
            assert!(e.to_string().contains("not in flight"), "{t:?}: {e}");
            drop(s);
            raw.expect_protocol_goodbye("not in flight", "forged response");
        }
    });
}

// --- Processes: a listener in a child process, killed in the middle. ---

#[test]
fn role_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let addr = role.strip_prefix("listener|").expect("a listener role");
    let listener = Listener::bind(addr, ServerOptions::default()).expect("child bind");
    println!("@@READY {}@@", listener.address());
    let mut s = listener
        .accept(10 * SEC)
        .expect("accept")
        .expect("a client");
    s.peer.notify(b"welcome").expect("push");
    loop {
        let m = match s.peer.next_incoming(10 * SEC) {
            Ok(m) => m,
            Err(_) => return,
        };
        let id = m.id.expect("calls only");
        match m.body.as_slice() {
            b"hang" => {
                // Calls the client back, then hangs in the middle of the
                // call until killed.
                let back = s.peer.call(b"back?").expect("call back");
                println!("@@BACK {}@@", String::from_utf8_lossy(&back));
                loop {
                    thread::park();
                }
            }
            other => {
                let reply = [other, b"!"].concat();
                s.peer.answer(id, Ok(&reply)).expect("answer");
            }
        }
    }
}

#[test]
fn a_listener_killed_in_the_middle_of_a_call_back() {
    watchdog("killed", LIMIT, || {
        for t in T::ALL {
            let dir = TempDir::new("bw-kill");
            let mut child = Peer::spawn(ROLE, &format!("listener|{}", t.bind_addr(&dir, "c")));
            let addr = child.expect("READY ", 10 * SEC);
            let mut client = Client::connect(&addr, ClientOptions::default()).expect("connect");
            let pushed = client.next_incoming(5 * SEC).expect("the welcome push");
            assert_eq!(pushed.body, b"welcome", "{t:?}");
            assert_eq!(client.call(b"ping").expect("a call"), b"ping!", "{t:?}");
            client
                .on_call(|req: &[u8], resp: &mut Vec<u8>| {
                    resp.extend_from_slice(req);
                    resp.extend_from_slice(b" yes");
                    Ok(())
                })
                .expect("handler");
            let calling = thread::spawn(move || {
                let r = client.call_timeout(b"hang", 30 * SEC);
                (client, r)
            });
            assert_eq!(child.expect("BACK ", 10 * SEC), "back? yes", "{t:?}");
            child.kill();
            let (client, r) = calling.join().expect("calling");
            let e = r.expect_err("the listener died");
            assert!(
                support::is_gone_or_closed(&e),
                "{t:?}: a clear error, not a timeout: {e}"
            );
            assert!(!client.is_connected(), "{t:?}");
        }
    });
}

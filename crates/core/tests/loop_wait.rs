//! Waiting for answers in an event loop: `Client::poll_fd` becomes readable
//! when an answer has begun to arrive after `Client::try_recv` found none
//! (over `shm:` the server rings the client's bell), and when the session
//! ends; `Client::abandon` drops an answer; blocking calls mix with it.

mod support;

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::child::Peer;
use support::{connect, opts_timeout, start, watchdog, xform, xform_into, T};

/// `poll(2)` on `fd` for up to `limit`: whether it became readable.
fn readable(fd: BorrowedFd<'_>, limit: Duration) -> bool {
    let ready = shmlink_sys::poll::readable(fd, Some(Instant::now() + limit)).expect("poll");
    ready != shmlink_sys::poll::Ready::TimedOut
}

fn answers_wake_the_loop(t: T) {
    watchdog("loop", Duration::from_secs(60), move || {
        let srv = start(t, Default::default(), |req: &[u8], resp: &mut Vec<u8>| {
            xform_into(req, resp);
            Ok(())
        });
        let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
        c.poll_fd().expect("poll_fd");
        let mut want = HashMap::new();
        let mut wakes = 0;
        for round in 0..200u32 {
            for k in 0..(1 + round % 50) {
                let req = format!("r{round}.{k}").into_bytes();
                let id = c.send(&req).expect("send");
                want.insert(id, xform(&req));
            }
            while !want.is_empty() {
                match c.try_recv().expect("try_recv") {
                    Some(r) => {
                        let expected = want.remove(&r.id).expect("an answer to a call in flight");
                        assert_eq!(r.result.expect("ok"), expected);
                    }
                    None => {
                        let fd = c.poll_fd().expect("poll_fd");
                        assert!(readable(fd, Duration::from_secs(10)), "no wake-up in 10 s");
                        wakes += 1;
                    }
                }
            }
            // A blocking call on the same client between loop rounds.
            assert_eq!(c.call(b"blocking").expect("call"), xform(b"blocking"));
        }
        assert!(wakes > 0, "the loop never had to wait");
    });
}

#[test]
fn shm_answers_wake_the_loop() {
    answers_wake_the_loop(T::Shm);
}

#[test]
fn unix_answers_wake_the_loop() {
    answers_wake_the_loop(T::Unix);
}

#[test]
fn tcp_answers_wake_the_loop() {
    answers_wake_the_loop(T::Tcp);
}

fn abandoned_answers_are_dropped(t: T) {
    watchdog("abandon", Duration::from_secs(60), move || {
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let go_rx = std::sync::Mutex::new(go_rx);
        let srv = start(
            t,
            Default::default(),
            move |req: &[u8], resp: &mut Vec<u8>| {
                if req == b"hold" {
                    let _ = go_rx
                        .lock()
                        .map(|rx| rx.recv_timeout(Duration::from_secs(10)));
                }
                xform_into(req, resp);
                Ok(())
            },
        );
        let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
        c.poll_fd().expect("poll_fd");
        let held = c.send(b"hold").expect("send");
        let kept = c.send(b"kept").expect("send");
        assert_eq!(c.try_recv().expect("try_recv"), None);
        assert!(c.abandon(held));
        assert!(!c.abandon(held), "abandoned twice");
        go_tx.send(()).expect("release the handler");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "no answer");
            match c.try_recv().expect("try_recv") {
                Some(r) => {
                    assert_eq!(r.id, kept, "the abandoned call's answer was dropped");
                    assert_eq!(r.result.expect("ok"), xform(b"kept"));
                    break;
                }
                None => {
                    let fd = c.poll_fd().expect("poll_fd");
                    readable(fd, Duration::from_secs(10));
                }
            }
        }
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.call(b"after").expect("call"), xform(b"after"));
    });
}

#[test]
fn shm_abandoned_answers_are_dropped() {
    abandoned_answers_are_dropped(T::Shm);
}

#[test]
fn unix_abandoned_answers_are_dropped() {
    abandoned_answers_are_dropped(T::Unix);
}

const ROLE: &str = "SHMLINK_LOOP_ROLE";

/// The child: a server whose handler never answers `block`.
#[test]
fn role_child() {
    if let Ok(addr) = std::env::var(ROLE) {
        support::child::blocking_server(&addr);
    }
}

/// The server killed (-9) while a call waits in the loop: the descriptor
/// becomes readable, and `try_recv` says the peer is gone.
fn a_killed_server_wakes_the_loop(t: T) {
    watchdog("killed", Duration::from_secs(60), move || {
        let dir = support::TempDir::new(t.scheme());
        let bind = t.bind_addr(&dir, "k");
        let mut child = Peer::spawn(ROLE, &bind);
        let addr = child.expect("READY", Duration::from_secs(20));
        let mut c = connect(addr.trim(), opts_timeout(Duration::from_secs(30)));
        c.poll_fd().expect("poll_fd");
        assert_eq!(c.call(b"first").expect("call"), xform(b"first"));
        c.send(b"block").expect("send");
        child.expect("ENTERED", Duration::from_secs(20));
        assert_eq!(c.try_recv().expect("try_recv"), None);
        child.kill();
        let started = Instant::now();
        let end = loop {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the end never showed"
            );
            let fd = c.poll_fd().expect("poll_fd");
            assert!(readable(fd, Duration::from_secs(20)), "no wake-up");
            match c.try_recv() {
                Ok(None) => {}
                Ok(Some(r)) => panic!("an answer from a killed server: {r:?}"),
                Err(e) => break e,
            }
        };
        assert!(
            matches!(
                end,
                shmlink::Error::PeerGone { .. } | shmlink::Error::Closed { .. }
            ),
            "{end}"
        );
    });
}

#[test]
fn shm_a_killed_server_wakes_the_loop() {
    a_killed_server_wakes_the_loop(T::Shm);
}

#[test]
fn unix_a_killed_server_wakes_the_loop() {
    a_killed_server_wakes_the_loop(T::Unix);
}

/// A `Bell` frame needs capability bit 9 (and is never sent over a
/// stream, where it is not agreed either): the server ends the session with
/// a protocol error naming the bit.
fn a_bell_without_the_capability_is_refused(t: T) {
    use shmlink::wire::{FrameHeader, Kind};
    use support::raw::{hello, RawSession};
    watchdog("bell", Duration::from_secs(30), move || {
        let srv = start(t, Default::default(), |req: &[u8], resp: &mut Vec<u8>| {
            xform_into(req, resp);
            Ok(())
        });
        let (_, raw) = RawSession::open(&srv.addr, &hello(t));
        let mut raw = raw.expect("a session");
        raw.send(FrameHeader::whole(Kind::Bell, 0, 0), b"");
        raw.expect_protocol_goodbye("capability bit 9", "a bell without bit 9");
    });
}

#[test]
fn shm_a_bell_without_the_capability_is_refused() {
    a_bell_without_the_capability_is_refused(T::Shm);
}

#[test]
fn unix_a_bell_without_the_capability_is_refused() {
    a_bell_without_the_capability_is_refused(T::Unix);
}

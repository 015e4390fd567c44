//! The async client on tokio (feature `tokio`): many calls at once on one
//! session, matched by id; cancellation and timeouts leave the session
//! usable; a server killed mid-call fails the waiting calls.
#![cfg(feature = "tokio")]

mod support;

use std::time::Duration;

use shmlink::tokio::AsyncClient;
use support::child::Peer;
use support::{start, watchdog, xform, xform_into, TempDir, T};

const ROLE: &str = "SHMLINK_TOKIO_ROLE";

/// The child: a server whose handler never answers `block`.
#[test]
fn role_child() {
    if let Ok(addr) = std::env::var(ROLE) {
        support::child::blocking_server(&addr);
    }
}

/// A runtime whose tasks run beside a blocked one (a test waiting for a
/// child's output).
fn two_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn ten_thousand_calls_at_once(t: T) {
    watchdog("10k", Duration::from_secs(120), move || {
        let srv = start(t, Default::default(), |req: &[u8], resp: &mut Vec<u8>| {
            xform_into(req, resp);
            Ok(())
        });
        let addr = srv.addr.clone();
        runtime().block_on(async move {
            let c = AsyncClient::connect(&addr, Default::default())
                .await
                .expect("connect");
            let mut tasks = Vec::new();
            for i in 0..10_000u32 {
                let c = c.clone();
                tasks.push(tokio::spawn(async move {
                    let req = i.to_le_bytes().repeat(16);
                    let answer = c.call(&req).await.expect("call");
                    assert_eq!(answer, xform(&req), "call {i}");
                }));
            }
            for t in tasks {
                t.await.expect("task");
            }
            assert_eq!(c.in_flight(), 0);
            // Pipelined from one task: send, then receive in arrival order.
            let ids: Vec<_> = (0..1000u32)
                .map(|i| c.send(&i.to_le_bytes()).expect("send"))
                .collect();
            let mut seen = std::collections::HashSet::new();
            for _ in 0..ids.len() {
                let r = c.recv().await.expect("recv");
                assert!(seen.insert(r.id));
            }
            assert_eq!(seen.len(), ids.len());
            c.notify(b"one-way").expect("notify");
            assert_eq!(c.call(b"last").await.expect("call"), xform(b"last"));
        });
    });
}

#[test]
fn shm_ten_thousand_calls_at_once() {
    ten_thousand_calls_at_once(T::Shm);
}

#[test]
fn unix_ten_thousand_calls_at_once() {
    ten_thousand_calls_at_once(T::Unix);
}

#[test]
fn tcp_ten_thousand_calls_at_once() {
    ten_thousand_calls_at_once(T::Tcp);
}

/// A call dropped (or timed out) while its answer is held back is
/// abandoned: the answer is dropped when it comes, later calls get theirs.
fn cancelled_calls_leave_the_session_usable(t: T) {
    watchdog("cancel", Duration::from_secs(60), move || {
        let dir = TempDir::new(t.scheme());
        let bind = t.bind_addr(&dir, "c");
        let mut child = Peer::spawn(ROLE, &bind);
        let addr = child.expect("READY", Duration::from_secs(20));
        let rt = two_worker_runtime();
        rt.block_on(async move {
            let c = AsyncClient::connect(addr.trim(), Default::default())
                .await
                .expect("connect");
            // A timeout: `slow` is answered after 100 ms.
            let e = c
                .call_timeout(b"slow", Duration::from_millis(20))
                .await
                .expect_err("no answer in time");
            assert!(matches!(e, shmlink::Error::Timeout { .. }), "{e}");
            assert_eq!(c.in_flight(), 0, "the timed-out call is abandoned");
            // Its answer comes first, and is dropped.
            assert_eq!(c.call(b"after").await.expect("call"), xform(b"after"));
            // A dropped future.
            tokio::select! {
                r = c.call(b"slow") => panic!("answered: {r:?}"),
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
            assert_eq!(c.in_flight(), 0, "the dropped call is abandoned");
            assert_eq!(c.call(b"again").await.expect("call"), xform(b"again"));
            let d = c;
            // The server killed while calls wait: they fail, none hangs.
            let waiting = {
                let d = d.clone();
                tokio::spawn(async move { d.call(b"block").await })
            };
            tokio::task::block_in_place(|| {
                child.expect("ENTERED", Duration::from_secs(20));
                child.kill();
            });
            let r = tokio::time::timeout(Duration::from_secs(20), waiting)
                .await
                .expect("the waiting call ends")
                .expect("task");
            let e = r.expect_err("a killed server answers nothing");
            assert!(
                matches!(
                    e,
                    shmlink::Error::PeerGone { .. } | shmlink::Error::Closed { .. }
                ),
                "{e}"
            );
        });
    });
}

#[test]
fn shm_cancelled_calls_leave_the_session_usable() {
    cancelled_calls_leave_the_session_usable(T::Shm);
}

#[test]
fn unix_cancelled_calls_leave_the_session_usable() {
    cancelled_calls_leave_the_session_usable(T::Unix);
}

/// An async handler: each request's `async fn` runs on the runtime (here it
/// awaits a timer before answering), sessions concurrently.
fn an_async_handler_answers(t: T) {
    watchdog("serve", Duration::from_secs(60), move || {
        let rt = two_worker_runtime();
        rt.block_on(async move {
            let dir = TempDir::new(t.scheme());
            let bind = t.bind_addr(&dir, "a");
            let server = shmlink::tokio::serve(&[bind.as_str()], |req: Vec<u8>| async move {
                if req == b"fail" {
                    return Err(shmlink::RemoteError::new(7, "asked to fail"));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                Ok(xform(&req))
            })
            .expect("serve");
            let addr = server.addresses()[0].to_string();
            let mut tasks = Vec::new();
            for s in 0..4u32 {
                let c = AsyncClient::connect(&addr, Default::default())
                    .await
                    .expect("connect");
                for i in 0..50u32 {
                    let c = c.clone();
                    tasks.push(tokio::spawn(async move {
                        let req = format!("{s}.{i}").into_bytes();
                        assert_eq!(c.call(&req).await.expect("call"), xform(&req));
                    }));
                }
            }
            for t in tasks {
                t.await.expect("task");
            }
            let c = AsyncClient::connect(&addr, Default::default())
                .await
                .expect("connect");
            match c.call(b"fail").await {
                Err(shmlink::Error::Remote(r)) => assert_eq!(r.code, 7),
                other => panic!("a remote error, got {other:?}"),
            }
            tokio::task::block_in_place(|| server.stop()).expect("stop");
        });
    });
}

#[test]
fn shm_an_async_handler_answers() {
    an_async_handler_answers(T::Shm);
}

#[test]
fn unix_an_async_handler_answers() {
    an_async_handler_answers(T::Unix);
}

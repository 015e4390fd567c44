//! Deep pipelining: more calls in flight than the rings (shm) or the socket
//! buffers (unix, tcp) hold. While a client waits for room to send, it drains
//! the responses the server is blocked writing, so neither side waits on the
//! other forever.

mod support;

use std::time::Duration;

use support::{connect, opts_timeout, start, watchdog, xform, xform_into, T};

fn more_calls_in_flight_than_buffers_hold(t: T) {
    watchdog("pipeline", Duration::from_secs(60), move || {
        let srv = start(t, Default::default(), |req: &[u8], resp: &mut Vec<u8>| {
            xform_into(req, resp);
            Ok(())
        });
        let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
        // 2,000 calls of 2 KiB each way: 4 MiB in flight against 64 KiB rings
        // or a few hundred KiB of socket buffers.
        let reqs: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| {
                let mut r = vec![0u8; 2048];
                r[..4].copy_from_slice(&i.to_le_bytes());
                r
            })
            .collect();
        let mut ids = std::collections::HashMap::new();
        for (i, r) in reqs.iter().enumerate() {
            let id = c.send(r).unwrap_or_else(|e| panic!("send {i}: {e}"));
            ids.insert(id, i);
        }
        for _ in 0..reqs.len() {
            let reply = c.recv().expect("recv");
            let i = ids.remove(&reply.id).expect("reply to a call in flight");
            assert_eq!(reply.result.expect("ok"), xform(&reqs[i]), "reply {i}");
        }
        assert!(ids.is_empty());
        assert_eq!(c.call(b"after").expect("call"), xform(b"after"));
    });
}

#[test]
fn shm_more_calls_in_flight_than_the_rings_hold() {
    more_calls_in_flight_than_buffers_hold(T::Shm);
}

#[test]
fn unix_more_calls_in_flight_than_the_socket_buffers_hold() {
    more_calls_in_flight_than_buffers_hold(T::Unix);
}

#[test]
fn tcp_more_calls_in_flight_than_the_socket_buffers_hold() {
    more_calls_in_flight_than_buffers_hold(T::Tcp);
}

/// `wait_readable` waits for an answer's first bytes without taking it: false
/// while the server holds the answer back, true once it is sent, the answer
/// then received whole; a chunked answer (larger than a ring) too; an error
/// with nothing in flight.
fn wait_readable_waits_without_receiving(t: T) {
    watchdog("wait_readable", Duration::from_secs(60), move || {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = std::sync::Mutex::new(held);
        let srv = start(
            t,
            Default::default(),
            move |req: &[u8], resp: &mut Vec<u8>| {
                if req == b"hold" {
                    held.lock().expect("held").recv().expect("released");
                }
                xform_into(req, resp);
                Ok(())
            },
        );
        let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
        assert!(matches!(
            c.wait_readable(Duration::from_millis(1)),
            Err(shmlink::Error::NothingInFlight { .. })
        ));
        let id = c.send(b"hold").expect("send");
        assert!(!c.wait_readable(Duration::from_millis(20)).expect("wait"));
        release.send(()).expect("release");
        assert!(c.wait_readable(Duration::from_secs(10)).expect("wait"));
        let reply = c.recv().expect("recv");
        assert_eq!((reply.id, reply.result.expect("ok")), (id, xform(b"hold")));
        // An answer streamed in chunks: readable at its first chunk, received whole.
        let big = vec![7u8; 1 << 20];
        c.send(&big).expect("send big");
        assert!(c.wait_readable(Duration::from_secs(10)).expect("wait"));
        assert_eq!(c.recv().expect("recv big").result.expect("ok"), xform(&big));
        assert_eq!(c.call(b"after").expect("call"), xform(b"after"));
    });
}

#[test]
fn shm_wait_readable_waits_without_receiving() {
    wait_readable_waits_without_receiving(T::Shm);
}

#[test]
fn unix_wait_readable_waits_without_receiving() {
    wait_readable_waits_without_receiving(T::Unix);
}

#[test]
fn tcp_wait_readable_waits_without_receiving() {
    wait_readable_waits_without_receiving(T::Tcp);
}

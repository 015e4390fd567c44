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

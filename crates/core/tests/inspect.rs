//! `shmlink::inspect` (capability bit 8) against a running server: every
//! session listed with what it carried, the totals, ended sessions gone,
//! kept segments counted; and the refusals (TCP, malformed inspection
//! hellos). The other-uid refusal runs in `handshake.rs` with its child.

mod support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use shmlink::wire::{
    Hello, Report, ReportTransport, Welcome, Wire, CAP_CHUNKED, CAP_INSPECT, PROTOCOL_MAX,
    PROTOCOL_MIN, WELCOME_LEN,
};
use shmlink::{ClientOptions, Error, RefusalCode, RemoteError, Server, ServerOptions};
use support::*;

const LIMIT: Duration = Duration::from_secs(60);
const STEP: Duration = Duration::from_secs(20);

fn echo(req: &[u8], resp: &mut Vec<u8>) -> Result<(), RemoteError> {
    xform_into(req, resp);
    Ok(())
}

fn inspect(addr: &str) -> Report {
    shmlink::inspect(addr, Duration::from_secs(5)).unwrap_or_else(|e| panic!("inspect {addr}: {e}"))
}

/// A server on shm, unix and tcp in a fresh directory.
fn three(dir: &TempDir) -> (shmlink::RunningServer, [String; 3]) {
    let binds = [
        T::Shm.bind_addr(dir, "s"),
        T::Unix.bind_addr(dir, "u"),
        T::Tcp.bind_addr(dir, "t"),
    ];
    let server = Server::bind(&binds, ServerOptions::default())
        .and_then(|s| s.spawn(echo))
        .expect("server");
    let a = server.addresses();
    let addrs = [a[0].to_string(), a[1].to_string(), a[2].to_string()];
    (server, addrs)
}

#[test]
fn every_session_is_listed_with_what_it_carried() {
    watchdog(
        "every_session_is_listed_with_what_it_carried",
        LIMIT,
        || {
            let dir = TempDir::new("inspect");
            let (server, [shm, unix, tcp]) = three(&dir);
            let mut calls = Vec::new();
            for (addr, n) in [(&shm, 3usize), (&unix, 2), (&tcp, 1)] {
                let mut c = connect(addr, ClientOptions::default());
                for _ in 0..n {
                    assert_eq!(c.call(&[7u8; 100]).expect("call"), xform(&[7u8; 100]));
                }
                calls.push(c);
            }
            // Asked at any of its Unix addresses, the same server answers.
            for at in [&shm, &unix] {
                let r = inspect(at);
                assert_eq!(r.totals.server_pid, std::process::id());
                assert_eq!(r.totals.calls, 6);
                assert_eq!(r.totals.sessions_opened, 3);
                assert_eq!(r.totals.sessions_closed, 0);
                assert!(r.totals.shm_bytes > 0, "the shm session's segment");
                assert_eq!(r.sessions.len(), 3, "{:?}", r.sessions);
                let want = [
                    (ReportTransport::Shm, 3u64),
                    (ReportTransport::Unix, 2),
                    (ReportTransport::Tcp, 1),
                ];
                for (s, (t, n)) in r.sessions.iter().zip(want) {
                    assert_eq!(s.transport, t);
                    assert_eq!((s.messages_in, s.messages_out), (n, n), "{s:?}");
                    assert_eq!((s.bytes_in, s.bytes_out), (100 * n, 100 * n), "{s:?}");
                    assert!(s.age_ms < 60_000, "{s:?}");
                    if t == ReportTransport::Tcp {
                        assert_eq!((s.peer_pid, s.peer_uid), (0, shmlink::wire::UID_UNKNOWN));
                    } else {
                        assert_eq!(s.peer_pid, std::process::id(), "{s:?}");
                        assert_eq!(s.peer_uid, shmlink_sys::cred::current_uid());
                    }
                    if t == ReportTransport::Shm {
                        let ring = ClientOptions::default().ring_size as u32;
                        assert_eq!((s.ring_c2s, s.ring_s2c), (ring, ring), "{s:?}");
                        assert!(s.fill_c2s <= ring && s.fill_s2c <= ring);
                    } else {
                        assert_eq!(
                            (s.ring_c2s, s.ring_s2c, s.fill_c2s, s.fill_s2c),
                            (0, 0, 0, 0)
                        );
                    }
                }
            }
            // An ended session leaves the list; the totals keep it.
            drop(calls.remove(1));
            wait_until("the unix session gone from the report", STEP, || {
                inspect(&shm).sessions.len() == 2
            });
            let r = inspect(&shm);
            assert!(r
                .sessions
                .iter()
                .all(|s| s.transport != ReportTransport::Unix));
            assert_eq!(r.totals.sessions_closed, 1);
            assert_eq!(r.totals.calls, 6, "an inspection is not a call");
            drop(calls);
            server.stop().expect("stop");
        },
    );
}

/// A process that ends its `shm:` session cleanly leaves its segment kept
/// for it a while: the totals count it, then not.
#[test]
fn kept_segments_are_counted() {
    watchdog("kept_segments_are_counted", LIMIT, || {
        let srv = start(T::Shm, ServerOptions::default(), echo);
        let mut c = connect(&srv.addr, ClientOptions::default());
        c.call(b"x").expect("call");
        drop(c);
        wait_until("the segment kept", STEP, || {
            inspect(&srv.addr).totals.kept_segments == 1
        });
        assert!(inspect(&srv.addr).totals.kept_bytes > 0);
        wait_until("the kept segment freed", STEP, || {
            inspect(&srv.addr).totals.kept_segments == 0
        });
    });
}

#[test]
fn inspection_over_tcp_is_refused() {
    watchdog("inspection_over_tcp_is_refused", LIMIT, || {
        let srv = start(T::Tcp, ServerOptions::default(), echo);
        match shmlink::inspect(&srv.addr, Duration::from_secs(5)) {
            Err(Error::Refused { code, message, .. }) => {
                assert_eq!(code, RefusalCode::NotAllowed);
                assert!(message.contains("over TCP"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(
            srv.stats()
                .sessions_opened
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    });
}

/// Sends `hello` on a raw socket; the welcome's status and text.
fn raw(addr: &str, hello: &Hello) -> (u16, String) {
    let mut s = UnixStream::connect(socket_path(addr).expect("path")).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(&hello.encode()).expect("hello");
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read");
    assert!(all.len() >= WELCOME_LEN, "a welcome");
    let status = u16::from_le_bytes([all[10], all[11]]);
    let w = Welcome::decode_fixed(&all[..WELCOME_LEN]).expect("welcome");
    let text = match w.0.with_text(&all[WELCOME_LEN..]) {
        Welcome::Refused { message, .. } => message,
        Welcome::Accepted { .. } => {
            Report::decode(&all[WELCOME_LEN..]).expect("an accepted inspection carries a report");
            String::new()
        }
    };
    (status, text)
}

#[test]
fn malformed_inspection_hellos_are_refused() {
    watchdog("malformed_inspection_hellos_are_refused", LIMIT, || {
        let srv = start(T::Shm, ServerOptions::default(), echo);
        let good = Hello {
            version_min: PROTOCOL_MIN,
            version_max: PROTOCOL_MAX,
            wire: Wire::Shm,
            caps: CAP_INSPECT,
            ring_c2s: 0,
            ring_s2c: 0,
            max_message: 1024,
        };
        assert_eq!(raw(&srv.addr, &good), (0, String::new()));
        let cases = [
            (
                Hello {
                    caps: CAP_INSPECT | CAP_CHUNKED,
                    ..good
                },
                "capability bit 8 alone",
            ),
            (
                Hello {
                    ring_c2s: 65536,
                    ring_s2c: 65536,
                    ..good
                },
                "ring sizes 0/0",
            ),
            (
                Hello {
                    wire: Wire::Stream,
                    ..good
                },
                "this listener's wire",
            ),
        ];
        for (hello, says) in cases {
            let (status, text) = raw(&srv.addr, &hello);
            assert_eq!(status, RefusalCode::BadRequest.to_wire(), "{text}");
            assert!(text.contains(says), "{text} should say {says}");
        }
        let (status, text) = raw(
            &srv.addr,
            &Hello {
                version_min: PROTOCOL_MAX + 1,
                version_max: PROTOCOL_MAX + 1,
                ..good
            },
        );
        assert_eq!(status, RefusalCode::Version.to_wire(), "{text}");
        assert_eq!(
            srv.stats()
                .sessions_opened
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    });
}

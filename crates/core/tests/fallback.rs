//! `shm:` sessions the server cannot give shared memory (its
//! `max_shm_bytes` reached) continue over their socket with the same API
//! and a logged reason (capability bit 6), unless the client requires
//! shared memory; `Client::transport` says which a session uses; nothing
//! fails and nothing leaks under a small limit with many sessions.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use shmlink::wire::SegmentHeader;
use shmlink::{ClientOptions, Error, RefusalCode, ServerOptions, Transport};
use support::{connect, start, wait_until, watchdog, xform, xform_into, Lines, Rng, LIMIT, T};

const RING: usize = 64 << 10;

/// Bytes of one session's segment with the default rings.
fn segment_bytes() -> u64 {
    SegmentHeader::for_rings(RING, RING).total_len
}

fn opts() -> ClientOptions {
    ClientOptions {
        ring_size: RING,
        timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

fn limited(sessions: u64, lines: &Lines) -> ServerOptions {
    ServerOptions {
        max_shm_bytes: sessions * segment_bytes(),
        log: lines.log(),
        ..ServerOptions::default()
    }
}

fn echo(req: &[u8], resp: &mut Vec<u8>) -> Result<(), shmlink::RemoteError> {
    xform_into(req, resp);
    Ok(())
}

/// Calls of several sizes (small, streamed in chunks, lent) all answer.
fn works(c: &mut shmlink::Client, seed: u64) {
    let mut rng = Rng::new(seed);
    for len in [0, 100, 70_000, 3 << 20] {
        let req = rng.bytes(len);
        assert_eq!(c.call(&req).expect("call"), xform(&req), "{len} bytes");
    }
}

#[test]
fn past_the_limit_a_session_continues_over_its_socket() {
    watchdog("fallback", LIMIT, || {
        let lines = Lines::default();
        let srv = start(T::Shm, limited(1, &lines), echo);
        let mut first = connect(&srv.addr, opts());
        assert_eq!(first.transport(), Transport::Shm);
        let mut second = connect(&srv.addr, opts());
        assert_eq!(second.transport(), Transport::Unix, "fell back");
        works(&mut second, 1);
        works(&mut first, 2);
        let line = lines.wait_for("continues over its socket");
        assert!(line.contains("shared memory limit"), "{line}");
        // A client that requires shared memory is refused, clearly.
        let strict = shmlink::Client::connect(
            &srv.addr,
            ClientOptions {
                shm_required: true,
                ..opts()
            },
        );
        match strict {
            Err(Error::Refused { code, message, .. }) => {
                assert_eq!(code, RefusalCode::ServerFailure);
                assert!(message.contains("max_shm_bytes"), "{message}");
            }
            r => panic!("expected a refusal, got {:?}", r.map(|c| c.transport())),
        }
        // The first session's memory comes back when it ends.
        drop(first);
        wait_until("the first session ended", Duration::from_secs(10), || {
            srv.stats().sessions_closed.load(Ordering::Relaxed) >= 1
        });
        let mut third = connect(&srv.addr, opts());
        assert_eq!(third.transport(), Transport::Shm, "room again");
        works(&mut third, 3);
    });
}

/// Many sessions under a limit of three: each works, three have shared
/// memory, and when all are gone the limit's memory is all back.
#[test]
fn many_sessions_under_a_small_limit() {
    watchdog("many", LIMIT, || {
        let lines = Lines::default();
        let srv = start(T::Shm, limited(3, &lines), echo);
        let mut clients: Vec<_> = (0..24).map(|_| connect(&srv.addr, opts())).collect();
        let shm = clients
            .iter()
            .filter(|c| c.transport() == Transport::Shm)
            .count();
        assert_eq!(shm, 3, "three sessions within the limit");
        for (i, c) in clients.iter_mut().enumerate() {
            works(c, i as u64);
        }
        clients.clear();
        wait_until("every session ended", Duration::from_secs(10), || {
            srv.stats().active_sessions() == 0
        });
        let again: Vec<_> = (0..3).map(|_| connect(&srv.addr, opts())).collect();
        for c in &again {
            assert_eq!(
                c.transport(),
                Transport::Shm,
                "the limit's memory came back"
            );
        }
    });
}

/// `unix:` and `tcp:` sessions say so; an `shm:` session with memory too.
#[test]
fn transport_says_what_a_session_uses() {
    watchdog("transport", LIMIT, || {
        for (t, want) in [
            (T::Shm, Transport::Shm),
            (T::Unix, Transport::Unix),
            (T::Tcp, Transport::Tcp),
        ] {
            let srv = start(t, ServerOptions::default(), echo);
            let c = connect(&srv.addr, opts());
            assert_eq!(c.transport(), want, "{t:?}");
        }
    });
}

//! Multi-process crash tests: the test binary re-executes itself as the peer
//! (a server or a client, chosen by SHMLINK_TEST_ROLE) and the parent kills
//! it with SIGKILL at chosen or random points. The survivor must notice at
//! once, clean up the session, leak nothing, and keep serving.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions, RemoteError, Server, ServerOptions};
use support::child::Peer;
use support::*;

const ROLE: &str = "SHMLINK_TEST_ROLE";

/// The tests here count process-wide resources: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

crate::per_transport!(
    serial: super::serial;
    server_killed_mid_call,
    client_killed_mid_call,
    client_killed_idle,
    client_killed_streaming,
    random_kill_points,
    server_killed_holding_a_lent_request,
    a_lent_response_outlives_a_killed_server,
);

// ---------- the child side ----------

/// Entry point of child processes; a no-op in a normal test run.
#[test]
fn role_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let parts: Vec<&str> = role.split('|').collect();
    match parts.as_slice() {
        ["server", addr] => child_server(addr),
        ["client", addr, mode] => child_client(addr, mode),
        _ => panic!("unknown role {role:?}"),
    }
}

fn say(marker: &str) {
    println!("@@{marker}@@");
}

fn child_server(addr: &str) {
    let server = Server::bind(&[addr], ServerOptions::default()).expect("child bind");
    say(&format!("READY {}", server.addresses()[0]));
    server
        .serve(|req: &[u8], resp: &mut Vec<u8>| {
            if req.starts_with(b"block") {
                say("ENTERED");
                loop {
                    thread::park();
                }
            }
            xform_into(req, resp);
            Ok(())
        })
        .expect("serve");
}

/// The reply the parent's server gives to a checksummed request.
fn checksum_reply(req: &[u8]) -> Vec<u8> {
    let mut v = req[..8.min(req.len())].to_vec();
    v.extend_from_slice(&fnv1a(req).to_le_bytes());
    v
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i.wrapping_mul(31) + 7) as u8).collect()
}

fn child_client(addr: &str, mode: &str) {
    let opts = opts_timeout(Duration::from_secs(20));
    if let Some(seed) = mode.strip_prefix("random:") {
        let mut rng = Rng::new(seed.parse().expect("seed"));
        say("START");
        let mut c = Client::connect(addr, opts).expect("child connect");
        for n in 1u64.. {
            let len = match rng.below(4) {
                0 => 0,
                1 => rng.below(64) as usize,
                2 => rng.below(8192) as usize,
                _ => rng.below(300_000) as usize,
            };
            let mut req = n.to_le_bytes().to_vec();
            req.extend(rng.bytes(len));
            match c.call(&req) {
                Ok(r) if r == checksum_reply(&req) => say(&format!("OK {n}")),
                other => {
                    say(&format!("BAD call {n}: {other:?}"));
                    std::process::exit(3);
                }
            }
        }
        return;
    }
    let mut c = Client::connect(addr, opts).expect("child connect");
    match mode {
        "midcall" => {
            say("CONNECTED");
            let r = c.call(b"block");
            say(&format!("BAD block returned {r:?}"));
        }
        "idle" => {
            assert_eq!(c.call(b"ping").expect("ping"), b"pong");
            say("IDLE");
            loop {
                thread::park();
            }
        }
        "stream" => {
            let mut rng = Rng::new(5);
            for i in 0u64.. {
                if i % 2 == 0 {
                    let mut req = i.to_le_bytes().to_vec();
                    req.extend(rng.bytes(4 << 20));
                    assert_eq!(c.call(&req).expect("big request"), checksum_reply(&req));
                } else {
                    let r = c
                        .call(format!("bigresp:{}", 4 << 20).as_bytes())
                        .expect("big response");
                    assert!(r == pattern(4 << 20), "big response content");
                }
                say(&format!("CALL {i}"));
            }
        }
        _ => panic!("unknown client mode {mode}"),
    }
}

// ---------- the parent side ----------

/// (a) The server process dies while a call is in its handler.
/// Mappings of arena segments in this process (`/proc/self/maps`).
fn arena_mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().filter(|l| l.contains("shmlink-arena")).count())
        .unwrap_or(0)
}

/// The server dies while its handler reads a request lent from the
/// client's arena: the call fails at once, the session's loans fail with a
/// clear error, and the client's arena is unmapped when the client goes.
fn server_killed_holding_a_lent_request(t: T) {
    let dir = TempDir::new("kills");
    let bind = t.bind_addr(&dir, "s");
    let mut peer = Peer::spawn(ROLE, &format!("server|{bind}"));
    let addr = peer.expect("READY ", Duration::from_secs(20));
    let before = arena_mappings();
    let mut busy =
        Client::connect(&addr, opts_timeout(Duration::from_secs(10))).expect("busy client");
    let caller = thread::spawn(move || {
        let mut req = b"block".to_vec();
        req.resize(1 << 20, 7);
        let r = busy.call(&req);
        (r, Instant::now(), busy)
    });
    peer.expect("ENTERED", Duration::from_secs(10));
    let killed = peer.kill();
    let (r, returned, mut busy) = caller.join().expect("caller");
    let took = returned.saturating_duration_since(killed);
    match &r {
        Err(e) if is_gone_or_closed(e) => assert!(e.is_fatal()),
        other => panic!("{t:?}: expected PeerGone/Closed, got {other:?}"),
    }
    assert!(
        took < Duration::from_secs(1),
        "{t:?}: noticed after {took:?}"
    );
    if t != T::Tcp {
        assert!(arena_mappings() > before, "{t:?}: the request was lent");
    }
    let e = busy.loan(4096).expect_err("a loan on a dead session");
    assert!(matches!(e, shmlink::Error::Closed { .. }), "{t:?}: {e}");
    drop(busy);
    assert_eq!(arena_mappings(), before, "{t:?}: the arena is unmapped");
}

/// The server dies (SIGKILL) while the client holds a response lent from
/// the server's arena: the bytes stay readable (the segment is sealed
/// against shrinking: no SIGBUS), the next call fails with a clear error,
/// and the mapping goes with the response.
fn a_lent_response_outlives_a_killed_server(t: T) {
    let dir = TempDir::new("kills");
    let bind = t.bind_addr(&dir, "s");
    let mut peer = Peer::spawn(ROLE, &format!("server|{bind}"));
    let addr = peer.expect("READY ", Duration::from_secs(20));
    let before = arena_mappings();
    let mut c = Client::connect(&addr, opts_timeout(Duration::from_secs(10))).expect("client");
    let req = vec![3u8; 2 << 20];
    let r = c.call_response(&req).expect("call");
    assert_eq!(r.is_lent(), t != T::Tcp, "{t:?}");
    peer.kill();
    assert!(
        *r == xform(&req)[..],
        "{t:?}: readable after the server died"
    );
    let e = c.call(b"ping").expect_err("the server is dead");
    assert!(is_gone_or_closed(&e), "{t:?}: {e}");
    drop(r);
    drop(c);
    assert_eq!(arena_mappings(), before, "{t:?}: both arenas are unmapped");
}

fn server_killed_mid_call(t: T) {
    let dir = TempDir::new("kills");
    let bind = t.bind_addr(&dir, "s");
    let mut peer = Peer::spawn(ROLE, &format!("server|{bind}"));
    let addr = peer.expect("READY ", Duration::from_secs(20));
    let mut idle =
        Client::connect(&addr, opts_timeout(Duration::from_secs(10))).expect("idle client");
    assert_eq!(idle.call(b"ping").expect("server works"), xform(b"ping"));
    let mut busy =
        Client::connect(&addr, opts_timeout(Duration::from_secs(10))).expect("busy client");
    let caller = thread::spawn(move || {
        let r = busy.call(b"block");
        (r, Instant::now(), busy)
    });
    peer.expect("ENTERED", Duration::from_secs(10));
    let killed = peer.kill();
    let (r, returned, busy) = caller.join().expect("caller");
    let took = returned.saturating_duration_since(killed);
    eprintln!("{t:?}: call failed {took:?} after the server was SIGKILLed (target 100 ms): {r:?}");
    match &r {
        Err(e) if is_gone_or_closed(e) => assert!(e.is_fatal()),
        other => panic!("{t:?}: expected PeerGone/Closed, got {other:?}"),
    }
    assert!(
        took < Duration::from_secs(1),
        "{t:?}: noticed the death after {took:?}"
    );
    assert!(!busy.is_connected());
    // The idle session notices on its next call.
    let t0 = Instant::now();
    let r = idle.call(b"ping");
    let took = t0.elapsed();
    eprintln!("{t:?}: idle client's next call failed after {took:?}: {r:?}");
    assert!(matches!(&r, Err(e) if is_gone_or_closed(e)), "{t:?}: {r:?}");
    assert!(took < Duration::from_secs(1));
    assert!(!idle.is_connected());
    // A new server can take over the dead server's (stale) socket file.
    if t != T::Tcp {
        let server = Server::bind(&[bind.as_str()], ServerOptions::default())
            .expect("bind over the dead server's socket")
            .spawn(|req: &[u8], resp: &mut Vec<u8>| {
                xform_into(req, resp);
                Ok(())
            })
            .expect("spawn");
        let mut c = connect(&bind, ClientOptions::default());
        assert_eq!(c.call(b"new").expect("new server"), xform(b"new"));
        drop(c);
        server.stop().expect("stop");
    }
}

/// The parent's server for client-crash tests.
struct Parent {
    /// Declared first: dropped (opening the gate) before the server.
    _release: OpenOnDrop,
    srv: Srv,
    gate: Arc<Gate>,
    calls: Arc<AtomicUsize>,
}

fn parent_server(t: T) -> Parent {
    let gate = Arc::new(Gate::closed());
    let calls = Arc::new(AtomicUsize::new(0));
    let (g, n) = (Arc::clone(&gate), Arc::clone(&calls));
    let srv = start(
        t,
        ServerOptions::default(),
        move |req: &[u8], resp: &mut Vec<u8>| {
            n.fetch_add(1, Ordering::SeqCst);
            if req == b"block" {
                g.pass();
                resp.extend_from_slice(b"unblocked");
            } else if req == b"ping" {
                resp.extend_from_slice(b"pong");
            } else if let Some(len) = req
                .strip_prefix(b"bigresp:")
                .and_then(|s| std::str::from_utf8(s).ok())
                .and_then(|s| s.parse::<usize>().ok())
            {
                *resp = pattern(len);
            } else {
                resp.extend_from_slice(&checksum_reply(req));
            }
            Ok::<(), RemoteError>(())
        },
    );
    Parent {
        _release: OpenOnDrop(Arc::clone(&gate)),
        srv,
        gate,
        calls,
    }
}

/// A parent-side client checks the server still answers correctly.
fn verify_serving(p: &Parent, rng: &mut Rng) {
    let mut c = connect(&p.srv.addr, opts_timeout(Duration::from_secs(10)));
    for _ in 0..3 {
        let n = rng.below(100_000) as usize;
        let mut req = rng.next_u64().to_le_bytes().to_vec();
        req.extend(rng.bytes(n));
        let got = c.call(&req).expect("parent-side call");
        assert_eq!(got, checksum_reply(&req), "parent-side reply");
    }
}

/// Stops the server and checks every resource is back to `base`.
fn finish(p: Parent, base: Resources, t: T) {
    let Parent {
        _release,
        mut srv,
        gate,
        ..
    } = p;
    gate.open();
    wait_until(
        &format!("{t:?}: sessions closed before stop"),
        Duration::from_secs(5),
        || srv.stats().active_sessions() == 0,
    );
    let stats_closed = srv.stats().sessions_closed.load(Ordering::Acquire);
    let stats_opened = srv.stats().sessions_opened.load(Ordering::Acquire);
    assert_eq!(stats_closed, stats_opened, "{t:?}: every session closed");
    srv.take().stop().expect("server stop");
    let took = wait_resources_back(&format!("{t:?}"), base, Duration::from_secs(10));
    eprintln!("{t:?}: resources back to baseline {took:?} after stop ({base:?})");
}

fn wait_sessions_closed(p: &Parent, t: T, what: &str, since: Instant) {
    let stats = p.srv.stats();
    wait_until(
        &format!("{t:?} {what}: session closed"),
        Duration::from_secs(5),
        || stats.active_sessions() == 0,
    );
    eprintln!(
        "{t:?} {what}: server closed the session {:?} after the kill",
        since.elapsed()
    );
}

/// (b) The client process dies while its call is in the handler.
fn client_killed_mid_call(t: T) {
    let base = snapshot();
    let p = parent_server(t);
    let mut peer = Peer::spawn(ROLE, &format!("client|{}|midcall", p.srv.addr));
    peer.expect("CONNECTED", Duration::from_secs(20));
    assert!(
        p.gate.wait_entered(1, Duration::from_secs(10)),
        "call reached the handler"
    );
    let killed = peer.kill();
    // The handler cannot be interrupted; once it returns the session must
    // notice the dead client and close.
    p.gate.open();
    wait_sessions_closed(&p, t, "mid-call", killed);
    verify_serving(&p, &mut Rng::new(1));
    drop(peer);
    finish(p, base, t);
}

/// (b) The client process dies while idle between calls.
fn client_killed_idle(t: T) {
    let base = snapshot();
    let p = parent_server(t);
    p.gate.open();
    let mut peer = Peer::spawn(ROLE, &format!("client|{}|idle", p.srv.addr));
    peer.expect("IDLE", Duration::from_secs(20));
    assert_eq!(p.srv.stats().active_sessions(), 1);
    let killed = peer.kill();
    wait_sessions_closed(&p, t, "idle", killed);
    verify_serving(&p, &mut Rng::new(2));
    drop(peer);
    finish(p, base, t);
}

/// (b) The client process dies while a 4 MiB message streams in either
/// direction through the 64 KiB ring / the socket.
fn client_killed_streaming(t: T) {
    let base = snapshot();
    let p = parent_server(t);
    p.gate.open();
    let mut rng = Rng::new(3);
    for round in 0..3 {
        let mut peer = Peer::spawn(ROLE, &format!("client|{}|stream", p.srv.addr));
        let before = p.calls.load(Ordering::SeqCst);
        // Let it complete a few large calls, then kill it somewhere in the
        // middle of the next transfer (most of its time is spent streaming).
        let k = 1 + rng.below(3);
        peer.expect(&format!("CALL {k}"), Duration::from_secs(30));
        let killed = peer.kill();
        assert!(p.calls.load(Ordering::SeqCst) > before);
        wait_sessions_closed(&p, t, &format!("streaming round {round}"), killed);
        verify_serving(&p, &mut rng);
    }
    finish(p, base, t);
}

/// (c) Twenty clients killed at pseudo-random points; the server keeps
/// answering a parent-side client correctly throughout.
fn random_kill_points(t: T) {
    let base = snapshot();
    let p = parent_server(t);
    p.gate.open();
    let mut rng = Rng::new(0x5EED ^ t as u64);
    let mut verifier = connect(&p.srv.addr, opts_timeout(Duration::from_secs(10)));
    let t0 = Instant::now();
    for i in 0..20 {
        let seed = rng.next_u64();
        let k = rng.below(8);
        let mut peer = Peer::spawn(ROLE, &format!("client|{}|random:{seed}", p.srv.addr));
        if k == 0 {
            peer.expect("START", Duration::from_secs(20));
        } else {
            peer.expect(&format!("OK {k}"), Duration::from_secs(20));
        }
        // Sometimes let it run on a little (the kill then lands inside a
        // call), sometimes kill at once.
        for _ in 0..rng.below(3) {
            peer.skip_line(Duration::from_millis(500));
        }
        peer.kill();
        peer.drain_check();
        let mut req = (i as u64).to_le_bytes().to_vec();
        let n = rng.below(50_000) as usize;
        req.extend(rng.bytes(n));
        let got = verifier
            .call(&req)
            .unwrap_or_else(|e| panic!("{t:?} iteration {i}: verifier: {e}"));
        assert_eq!(
            got,
            checksum_reply(&req),
            "{t:?} iteration {i}: verifier reply"
        );
    }
    eprintln!("{t:?}: 20 random kills in {:?}", t0.elapsed());
    drop(verifier);
    wait_until(
        &format!("{t:?}: all sessions closed"),
        Duration::from_secs(5),
        || p.srv.stats().active_sessions() == 0,
    );
    let s = p.srv.stats();
    eprintln!(
        "{t:?}: opened {} closed {} refused {} calls {}",
        s.sessions_opened.load(Ordering::Relaxed),
        s.sessions_closed.load(Ordering::Relaxed),
        s.refused.load(Ordering::Relaxed),
        s.calls.load(Ordering::Relaxed)
    );
    finish(p, base, t);
}

/// Baseline sanity: starting and stopping a server with a few sessions
/// returns every resource (so the crash tests' checks mean something).
#[test]
fn resources_return_after_clean_run() {
    let _g = serial();
    watchdog("resources_return_after_clean_run", LIMIT, || {
        for t in T::ALL {
            let base = snapshot();
            let p = parent_server(t);
            p.gate.open();
            let mut rng = Rng::new(11);
            for _ in 0..3 {
                verify_serving(&p, &mut rng);
            }
            wait_until("sessions closed", Duration::from_secs(5), || {
                p.srv.stats().active_sessions() == 0
            });
            finish(p, base, t);
        }
    });
}

//! The handshake against hostile or broken clients on raw sockets, socket
//! file handling (stale, live, not a socket, modes), and the uid policy
//! (with a child process run as another uid when the tests run as root).

mod support;

use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use shmlink::wire::{Hello, Welcome, Wire, HELLO_LEN, PROTOCOL_MAX, PROTOCOL_MIN, WELCOME_LEN};
use shmlink::{Client, ClientOptions, Error, RefusalCode, RemoteError, Server, ServerOptions};
use support::*;

const ROLE: &str = "SHMLINK_HS_ROLE";

crate::per_transport!(
    malformed_hellos_refused,
    truncated_hello_refused,
    wrong_version_range_refused,
    wire_mismatch_refused,
    ring_sizes_checked,
    oversized_garbage_survived,
    valid_hello_then_junk_ends_session,
    slow_loris_does_not_block_accept,
    refusal_always_reaches_client,
);

fn echo(req: &[u8], resp: &mut Vec<u8>) -> Result<(), RemoteError> {
    xform_into(req, resp);
    Ok(())
}

fn hs_opts() -> ServerOptions {
    ServerOptions {
        handshake_timeout: Duration::from_millis(500),
        ..Default::default()
    }
}

/// A raw connection to a server address.
enum Raw {
    U(UnixStream),
    Tcp(TcpStream),
}

impl Raw {
    fn connect(addr: &str) -> Raw {
        let raw = if let Some(p) = socket_path(addr) {
            Raw::U(UnixStream::connect(&p).unwrap_or_else(|e| panic!("connect {addr}: {e}")))
        } else {
            let hp = addr.strip_prefix("tcp:").expect("tcp address");
            Raw::Tcp(TcpStream::connect(hp).unwrap_or_else(|e| panic!("connect {addr}: {e}")))
        };
        raw.set_read_timeout(Some(Duration::from_secs(5)));
        raw
    }

    fn set_read_timeout(&self, t: Option<Duration>) {
        match self {
            Raw::U(s) => s.set_read_timeout(t),
            Raw::Tcp(s) => s.set_read_timeout(t),
        }
        .expect("set timeout");
    }

    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Raw::U(s) => s.write_all(b),
            Raw::Tcp(s) => s.write_all(b),
        }
    }

    fn shutdown_write(&self) {
        let _ = match self {
            Raw::U(s) => s.shutdown(Shutdown::Write),
            Raw::Tcp(s) => s.shutdown(Shutdown::Write),
        };
    }

    fn try_clone(&self) -> Raw {
        match self {
            Raw::U(s) => Raw::U(s.try_clone().expect("clone")),
            Raw::Tcp(s) => Raw::Tcp(s.try_clone().expect("clone")),
        }
    }

    fn read_some(&mut self, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
        match self {
            Raw::U(s) => {
                let (n, mut got) = shmlink_sys::fdpass::recv_with_fds(&*s, buf)?;
                fds.append(&mut got);
                Ok(n)
            }
            Raw::Tcp(s) => s.read(buf),
        }
    }

    /// Reads the whole welcome (with refusal text) and any descriptors.
    fn read_welcome(&mut self) -> io::Result<(Welcome, Vec<OwnedFd>)> {
        let mut buf = [0u8; WELCOME_LEN];
        let mut have = 0;
        let mut fds = Vec::new();
        while have < WELCOME_LEN {
            let n = self.read_some(&mut buf[have..], &mut fds)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("EOF after {have} bytes of welcome"),
                ));
            }
            have += n;
        }
        let (w, text_len) = Welcome::decode_fixed(&buf)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
        let mut text = vec![0u8; text_len];
        let mut got = 0;
        while got < text_len {
            let n = self.read_some(&mut text[got..], &mut fds)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "EOF in refusal text",
                ));
            }
            got += n;
        }
        Ok((w.with_text(&text), fds))
    }

    /// Reads until EOF or error; true when the peer closed.
    fn closed_by_peer(&mut self) -> bool {
        let mut buf = [0u8; 4096];
        let mut fds = Vec::new();
        loop {
            match self.read_some(&mut buf, &mut fds) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

/// Sends `bytes` as the hello and expects a refusal with `code` whose text
/// contains every one of `needles`.
fn expect_refusal(srv: &Srv, bytes: &[u8], code: RefusalCode, needles: &[&str], what: &str) {
    let before = srv.stats().refused.load(Ordering::Relaxed);
    let mut raw = Raw::connect(&srv.addr);
    raw.write_all(bytes).expect("write hello");
    match raw.read_welcome() {
        Ok((Welcome::Refused { code: c, message }, fds)) => {
            assert_eq!(c, code, "{what}: code (message {message:?})");
            assert!(fds.is_empty(), "{what}: a refusal carries no descriptor");
            for n in needles {
                assert!(
                    message.contains(n),
                    "{what}: refusal {message:?} lacks {n:?}"
                );
            }
        }
        other => panic!("{what}: expected a refusal, got {other:?}"),
    }
    assert!(raw.closed_by_peer(), "{what}: server closes after refusing");
    assert_eq!(
        srv.stats().refused.load(Ordering::Relaxed),
        before + 1,
        "{what}: counted as refused"
    );
}

/// The server still serves a well-behaved client.
fn assert_alive(srv: &Srv, what: &str) {
    let mut c = Client::connect(&srv.addr, opts_timeout(Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("{what}: server no longer accepts: {e}"));
    let got = c
        .call(what.as_bytes())
        .unwrap_or_else(|e| panic!("{what}: call: {e}"));
    assert_bytes(what, &got, &xform(what.as_bytes()));
}

fn malformed_hellos_refused(t: T) {
    let srv = start(t, hs_opts(), echo);
    let good = support::raw::hello(t).encode();
    let mut rng = Rng::new(5);
    let mut random = [0u8; HELLO_LEN];
    rng.fill(&mut random);
    let mut bad_magic = good;
    bad_magic[7] = b'X';
    let mut bad_wire = good;
    bad_wire[12] = 9;
    let mut reserved_13 = good;
    reserved_13[13] = 1;
    let mut reserved_tail = good;
    reserved_tail[44] = 0xFF;
    let empty_range = Hello {
        version_min: 3,
        version_max: 1,
        ..support::raw::hello(t)
    }
    .encode();
    let cases: [(&str, &[u8], &[&str]); 7] = [
        ("random bytes", &random, &["bad magic"]),
        ("all zero", &[0u8; HELLO_LEN], &["bad magic"]),
        ("wrong magic", &bad_magic, &["bad magic"]),
        ("unknown wire", &bad_wire, &["unknown wire 9"]),
        ("reserved byte 13", &reserved_13, &["reserved"]),
        ("reserved byte 44", &reserved_tail, &["reserved"]),
        ("empty version range", &empty_range, &["3..1", "empty"]),
    ];
    for (what, bytes, needles) in cases {
        expect_refusal(
            &srv,
            bytes,
            RefusalCode::BadRequest,
            needles,
            &format!("{t:?} {what}"),
        );
    }
    assert_eq!(srv.stats().sessions_opened.load(Ordering::Relaxed), 0);
    assert_alive(&srv, "after malformed hellos");
}

fn truncated_hello_refused(t: T) {
    let srv = start(t, hs_opts(), echo);
    let good = support::raw::hello(t).encode();
    // Half a hello, then end of stream: refused at once, not after the timeout.
    let mut raw = Raw::connect(&srv.addr);
    raw.write_all(&good[..20]).expect("write");
    raw.shutdown_write();
    let t0 = Instant::now();
    match raw.read_welcome() {
        Ok((Welcome::Refused { code, message }, _)) => {
            assert_eq!(code, RefusalCode::BadRequest, "{message}");
            assert!(message.contains("complete hello"), "{message}");
        }
        other => panic!("{t:?}: truncated hello: expected refusal, got {other:?}"),
    }
    eprintln!("{t:?}: truncated hello refused after {:?}", t0.elapsed());
    // 47 bytes and a full close: nobody to refuse, the server just goes on.
    for n in [0usize, 1, 47] {
        let mut raw = Raw::connect(&srv.addr);
        raw.write_all(&good[..n]).expect("write");
        drop(raw);
    }
    wait_until("truncated hellos refused", Duration::from_secs(5), || {
        srv.stats().refused.load(Ordering::Relaxed) >= 4
    });
    assert_eq!(srv.stats().sessions_opened.load(Ordering::Relaxed), 0);
    assert_alive(&srv, "after truncated hellos");
}

fn wrong_version_range_refused(t: T) {
    let srv = start(t, hs_opts(), echo);
    for (lo, hi) in [(7u16, 9u16), (0, 0), (2, u16::MAX)] {
        let h = Hello {
            version_min: lo,
            version_max: hi,
            ..support::raw::hello(t)
        };
        let theirs = format!("{lo}..={hi}");
        let ours = format!("{PROTOCOL_MIN}..={PROTOCOL_MAX}");
        expect_refusal(
            &srv,
            &h.encode(),
            RefusalCode::Version,
            &[&theirs, &ours],
            &format!("{t:?} versions {theirs}"),
        );
    }
    // An overlapping range is accepted at the highest common version.
    let mut raw = Raw::connect(&srv.addr);
    let h = Hello {
        version_min: 0,
        version_max: 5,
        ..support::raw::hello(t)
    };
    raw.write_all(&h.encode()).expect("write");
    match raw.read_welcome() {
        Ok((
            Welcome::Accepted {
                version,
                ring_c2s,
                ring_s2c,
                ..
            },
            fds,
        )) => {
            assert_eq!(version, PROTOCOL_MAX);
            assert_eq!(
                fds.len(),
                usize::from(t == T::Shm),
                "segment fd only for shm"
            );
            if t == T::Shm {
                assert_eq!((ring_c2s, ring_s2c), (65536, 65536));
            }
        }
        other => panic!("{t:?}: overlapping versions: {other:?}"),
    }
    wait_until("session opened", Duration::from_secs(5), || {
        srv.stats().sessions_opened.load(Ordering::Relaxed) == 1
    });
    drop(raw);
    wait_until(
        "session closed after hang-up",
        Duration::from_secs(5),
        || srv.stats().active_sessions() == 0,
    );
    assert_alive(&srv, "after version games");
}

fn wire_mismatch_refused(t: T) {
    let srv = start(t, hs_opts(), echo);
    let wrong = if t == T::Shm { Wire::Stream } else { Wire::Shm };
    let h = Hello {
        wire: wrong,
        ..support::raw::hello(t)
    };
    let needle = format!("serves {} sessions", t.scheme());
    expect_refusal(
        &srv,
        &h.encode(),
        RefusalCode::BadRequest,
        &[&needle],
        &format!("{t:?} wire"),
    );
    assert_alive(&srv, "after wire mismatch");
}

fn ring_sizes_checked(t: T) {
    let srv = start(t, hs_opts(), echo);
    let sizes = [
        (1000u32, 4096u32),
        (4096, 1 << 29),
        (0, 0),
        (2048, 2048),
        (4096, 4097),
    ];
    for (c2s, s2c) in sizes {
        let h = Hello {
            ring_c2s: c2s,
            ring_s2c: s2c,
            ..support::raw::hello(t)
        };
        if t == T::Shm {
            expect_refusal(
                &srv,
                &h.encode(),
                RefusalCode::BadRequest,
                &["power of two"],
                &format!("rings {c2s}/{s2c}"),
            );
        } else {
            // Ring sizes mean nothing on a stream: accepted.
            let mut raw = Raw::connect(&srv.addr);
            raw.write_all(&h.encode()).expect("write");
            assert!(
                matches!(raw.read_welcome(), Ok((Welcome::Accepted { .. }, _))),
                "{t:?}: ring sizes are ignored for stream sessions"
            );
        }
    }
    // Asymmetric valid sizes are fine for shm.
    if t == T::Shm {
        let mut raw = Raw::connect(&srv.addr);
        let h = Hello {
            ring_c2s: 4096,
            ring_s2c: 1 << 20,
            ..support::raw::hello(t)
        };
        raw.write_all(&h.encode()).expect("write");
        match raw.read_welcome() {
            Ok((
                Welcome::Accepted {
                    ring_c2s, ring_s2c, ..
                },
                fds,
            )) => {
                assert_eq!((ring_c2s, ring_s2c), (4096, 1 << 20));
                assert_eq!(fds.len(), 1);
                let facts = shmlink_sys::memfd::inspect(&fds[0]).expect("inspect");
                assert!(facts.sealed, "segment is sealed");
                assert_eq!(
                    facts.len,
                    shmlink::wire::SegmentHeader::for_rings(4096, 1 << 20).total_len
                );
            }
            other => panic!("asymmetric rings: {other:?}"),
        }
    }
    assert_alive(&srv, "after ring sizes");
}

fn oversized_garbage_survived(t: T) {
    let srv = start(t, hs_opts(), echo);
    let mut raw = Raw::connect(&srv.addr);
    let mut junk = Rng::new(77).bytes(1 << 20);
    junk[0] = b'J'; // never the hello magic
    let mut w = raw.try_clone();
    let writer = thread::spawn(move || w.write_all(&junk));
    match raw.read_welcome() {
        Ok((Welcome::Refused { code, message }, _)) => {
            assert_eq!(code, RefusalCode::BadRequest, "{message}");
        }
        // The server may reset the connection holding unread junk before
        // the refusal is read (TCP RST): fine, as long as nothing is accepted.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
            ) =>
        {
            eprintln!("{t:?}: 1 MiB junk: connection ended without a readable refusal: {e}");
        }
        other => panic!("{t:?}: 1 MiB junk: {other:?}"),
    }
    let wrote = writer.join().expect("writer");
    eprintln!("{t:?}: junk writer ended with {wrote:?}");
    wait_until("junk refused", Duration::from_secs(5), || {
        srv.stats().refused.load(Ordering::Relaxed) == 1
    });
    assert_eq!(srv.stats().sessions_opened.load(Ordering::Relaxed), 0);
    assert_alive(&srv, "after 1 MiB of junk");
}

fn valid_hello_then_junk_ends_session(t: T) {
    let srv = start(t, hs_opts(), echo);
    let mut raw = Raw::connect(&srv.addr);
    raw.write_all(&support::raw::hello(t).encode())
        .expect("hello");
    assert!(matches!(
        raw.read_welcome(),
        Ok((Welcome::Accepted { .. }, _))
    ));
    let mut junk = Rng::new(78).bytes(1 << 20);
    junk[4] = 0x77; // an unknown frame kind right away
    let mut w = raw.try_clone();
    let writer = thread::spawn(move || {
        let _ = w.write_all(&junk);
    });
    let took = wait_until("session ended by junk", Duration::from_secs(5), || {
        srv.stats().sessions_closed.load(Ordering::Relaxed) == 1
    });
    eprintln!("{t:?}: junk after the hello ended the session in {took:?}");
    raw.shutdown_write();
    assert!(raw.closed_by_peer(), "server closed the junk session");
    writer.join().expect("writer");
    assert_alive(&srv, "after junk frames");
}

fn slow_loris_does_not_block_accept(t: T) {
    let srv = start(
        t,
        ServerOptions {
            handshake_timeout: Duration::from_millis(200),
            ..Default::default()
        },
        echo,
    );
    let t0 = Instant::now();
    let mut lorises: Vec<Raw> = (0..6).map(|_| Raw::connect(&srv.addr)).collect();
    lorises[5]
        .write_all(&support::raw::hello(t).encode()[..30])
        .expect("half a hello");
    // A good client meanwhile. If the accept loop waited for each loris in
    // turn this would take at least 6 x 200 ms.
    let c0 = Instant::now();
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(5)));
    for i in 0..10u8 {
        assert_eq!(c.call(&[i; 33]).expect("good call"), xform(&[i; 33]));
    }
    let good = c0.elapsed();
    eprintln!("{t:?}: good client connected and made 10 calls in {good:?} with 6 slow-loris connections open");
    assert!(
        good < Duration::from_secs(1),
        "good client was held up: {good:?}"
    );
    for (i, l) in lorises.iter_mut().enumerate() {
        match l.read_welcome() {
            Ok((Welcome::Refused { code, message }, _)) => {
                assert_eq!(code, RefusalCode::BadRequest, "{message}");
                assert!(message.contains("200ms"), "names the timeout: {message}");
            }
            other => panic!("{t:?}: loris {i}: {other:?}"),
        }
    }
    let all = t0.elapsed();
    eprintln!("{t:?}: all 6 slow-loris connections refused {all:?} after connecting (handshake timeout 200ms)");
    assert!(all >= Duration::from_millis(200));
    assert!(all < Duration::from_secs(2), "refusals took {all:?}");
    assert_eq!(c.call(b"still").expect("still"), xform(b"still"));
}

/// A refusal sent before the server read the hello (session limit) must
/// still reach the client as `Refused`, whatever the timing.
fn refusal_always_reaches_client(t: T) {
    let srv = start(
        t,
        ServerOptions {
            max_sessions: 1,
            ..hs_opts()
        },
        echo,
    );
    let mut holder = connect(&srv.addr, ClientOptions::default());
    holder.call(b"hold").expect("holder");
    let mut other = Vec::new();
    const N: usize = 200;
    for _ in 0..N {
        match Client::connect(&srv.addr, opts_timeout(Duration::from_secs(5))) {
            Err(Error::Refused {
                code: RefusalCode::TooManySessions,
                ..
            }) => {}
            Err(e) => other.push(e.to_string()),
            Ok(_) => panic!("{t:?}: a second session was accepted over max_sessions=1"),
        }
    }
    assert!(
        other.is_empty(),
        "{t:?}: {} of {N} refused connects did not see Refused(TooManySessions), e.g. {:?}",
        other.len(),
        &other[..other.len().min(3)]
    );
    assert_eq!(holder.call(b"hold").expect("holder"), xform(b"hold"));
}

// ---------- socket files ----------

#[test]
fn stale_socket_file_is_replaced() {
    watchdog("stale_socket_file_is_replaced", LIMIT, || {
        for t in [T::Shm, T::Unix] {
            let dir = TempDir::new("stale");
            let addr = t.bind_addr(&dir, "s");
            let path = socket_path(&addr).expect("path");
            drop(UnixListener::bind(&path).expect("stale listener"));
            assert!(fs::symlink_metadata(&path)
                .expect("stale file")
                .file_type()
                .is_socket());
            let server = Server::bind(&[addr.as_str()], ServerOptions::default())
                .unwrap_or_else(|e| panic!("{t:?}: bind over a stale socket: {e}"))
                .spawn(echo)
                .expect("spawn");
            let mut c = connect(&addr, ClientOptions::default());
            assert_eq!(c.call(b"x").expect("call"), xform(b"x"));
            drop(c);
            server.stop().expect("stop");
            assert!(!path.exists());
        }
    });
}

/// A server killed between its bind and its rename leaves a hidden socket
/// beside the path; the next bind in that directory removes it, and leaves
/// a hidden socket something listens on, a hidden file that is not a
/// socket and a name of another length.
#[test]
fn hidden_sockets_left_by_a_killed_server_are_removed() {
    watchdog(
        "hidden_sockets_left_by_a_killed_server_are_removed",
        LIMIT,
        || {
            let dir = TempDir::new("hidden");
            let path = dir.join("s.sock");
            let stale = dir.join(".k3x9a");
            drop(UnixListener::bind(&stale).expect("stale hidden socket"));
            let live_path = dir.join(".live0");
            let live = UnixListener::bind(&live_path).expect("live hidden socket");
            let plain = dir.join(".notso");
            fs::write(&plain, b"x").expect("plain file");
            let other_len = dir.join(".ab");
            drop(UnixListener::bind(&other_len).expect("hidden socket of another length"));
            let addr = format!("unix:{}", path.display());
            let server = Server::bind(&[addr.as_str()], ServerOptions::default())
                .expect("bind")
                .spawn(echo)
                .expect("spawn");
            assert!(!stale.exists(), "the stale hidden socket is gone");
            assert!(live_path.exists(), "a listening hidden socket stays");
            assert!(plain.exists(), "a hidden file that is not a socket stays");
            assert!(other_len.exists(), "a name of another length stays");
            let mut c = connect(&addr, ClientOptions::default());
            assert_eq!(c.call(b"x").expect("call"), xform(b"x"));
            drop(c);
            server.stop().expect("stop");
            drop(live);
        },
    );
}

/// The socket file is bound under a hidden name and renamed into place: the
/// moment a client can see the path, a connect succeeds and the mode is the
/// final one; nothing else is left in the directory, whatever the length of
/// the name (one byte included).
#[test]
fn socket_file_appears_listening_with_its_mode() {
    watchdog("socket_file_appears_listening_with_its_mode", LIMIT, || {
        for t in [T::Shm, T::Unix] {
            let dir = TempDir::new("appear");
            for name in ["s", "a-somewhat-longer-socket-name.sock"] {
                let path = dir.join(name);
                let addr = format!("{}:{}", t.scheme(), path.display());
                for round in 0..20 {
                    let seen = path.clone();
                    let watching = Arc::new(AtomicBool::new(false));
                    let started = Arc::clone(&watching);
                    let watcher = thread::spawn(move || {
                        let deadline = Instant::now() + Duration::from_secs(10);
                        started.store(true, Ordering::Release);
                        while fs::symlink_metadata(&seen).is_err() {
                            assert!(Instant::now() < deadline, "the socket file never appeared");
                            thread::yield_now();
                        }
                        let mode = fs::symlink_metadata(&seen).map(|m| m.permissions().mode());
                        (
                            mode.expect("stat") & 0o777,
                            UnixStream::connect(&seen).map(drop),
                        )
                    });
                    // Bind only once the watcher is looking.
                    while !watching.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                    let server = Server::bind(&[addr.as_str()], ServerOptions::default())
                        .unwrap_or_else(|e| panic!("{t:?} {name}: bind: {e}"));
                    let (mode, connected) = watcher.join().expect("watcher");
                    assert_eq!(
                        mode, 0o600,
                        "{t:?} {name} round {round}: mode when first seen"
                    );
                    assert!(
                        connected.is_ok(),
                        "{t:?} {name} round {round}: connect when first seen: {connected:?}"
                    );
                    let names: Vec<String> = fs::read_dir(dir.path())
                        .expect("read_dir")
                        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                        .collect();
                    assert_eq!(names, [name], "{t:?}: only the socket is in the directory");
                    drop(server);
                    assert!(!path.exists(), "{t:?} {name}: removed at stop");
                }
            }
        }
    });
}

#[test]
fn live_socket_is_never_stolen() {
    watchdog("live_socket_is_never_stolen", LIMIT, || {
        for t in [T::Shm, T::Unix] {
            let dir = TempDir::new("live");
            let addr = t.bind_addr(&dir, "s");
            let path = socket_path(&addr).expect("path");
            let first = Server::bind(&[addr.as_str()], ServerOptions::default())
                .expect("first bind")
                .spawn(echo)
                .expect("spawn");
            let other = t.bind_addr(&dir, "other");
            match Server::bind(&[other.as_str(), addr.as_str()], ServerOptions::default()) {
                Err(Error::Bind { address, reason }) => {
                    assert_eq!(address, addr);
                    assert!(reason.contains("already listening"), "{reason}");
                }
                other => panic!("{t:?}: second bind: expected Bind, got {other:?}"),
            }
            assert!(
                path.exists(),
                "the live server's socket file is still there"
            );
            assert!(
                !socket_path(&other).expect("p").exists(),
                "{t:?}: the address bound before the failure was released"
            );
            let mut c = connect(&addr, ClientOptions::default());
            assert_eq!(
                c.call(b"first").expect("first still serves"),
                xform(b"first")
            );
            drop(c);
            first.stop().expect("stop");
        }
    });
}

#[test]
fn non_socket_file_is_untouched() {
    watchdog("non_socket_file_is_untouched", LIMIT, || {
        for t in [T::Shm, T::Unix] {
            let dir = TempDir::new("file");
            let addr = t.bind_addr(&dir, "s");
            let path = socket_path(&addr).expect("path");
            fs::write(&path, b"precious data").expect("write file");
            match Server::bind(&[addr.as_str()], ServerOptions::default()) {
                Err(Error::Bind { reason, .. }) => {
                    assert!(reason.contains("not a socket"), "{reason}");
                }
                other => panic!("{t:?}: expected Bind, got {other:?}"),
            }
            assert_eq!(fs::read(&path).expect("read back"), b"precious data");
            // A directory in the way is not replaced either.
            let addr2 = t.bind_addr(&dir, "d");
            let p2 = socket_path(&addr2).expect("path");
            fs::create_dir(&p2).expect("dir");
            assert!(matches!(
                Server::bind(&[addr2.as_str()], ServerOptions::default()),
                Err(Error::Bind { .. })
            ));
            assert!(p2.is_dir());
        }
    });
}

#[test]
fn socket_file_modes() {
    watchdog("socket_file_modes", LIMIT, || {
        let gid = shmlink_sys::cred::current_gid();
        for t in [T::Shm, T::Unix] {
            for (opts, want) in [
                (ServerOptions::default(), 0o600),
                (
                    ServerOptions {
                        socket_group: Some(gid),
                        ..Default::default()
                    },
                    0o660,
                ),
                (
                    ServerOptions {
                        socket_mode: Some(0o640),
                        ..Default::default()
                    },
                    0o640,
                ),
            ] {
                let dir = TempDir::new("mode");
                let addr = t.bind_addr(&dir, "s");
                let group = opts.socket_group;
                let server = Server::bind(&[addr.as_str()], opts).expect("bind");
                let md = fs::metadata(socket_path(&addr).expect("p")).expect("metadata");
                assert_eq!(
                    md.permissions().mode() & 0o777,
                    want,
                    "{t:?} group {group:?}"
                );
                if let Some(g) = group {
                    use std::os::unix::fs::MetadataExt;
                    assert_eq!(md.gid(), g);
                }
                drop(server);
            }
        }
    });
}

// ---------- the uid policy, with a child running as another uid ----------

/// Entry point of the child process (does nothing in a normal run).
#[test]
fn role_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    if let Some(addr) = role.strip_prefix("uidinspect|") {
        let r = shmlink::inspect(addr, Duration::from_secs(5));
        println!("@@RESULT {r:?}@@");
        return;
    }
    let addr = role.strip_prefix("uidclient|").expect("role");
    let r = Client::connect(addr, opts_timeout(Duration::from_secs(5)))
        .and_then(|mut c| c.call(b"from-65534"));
    println!("@@RESULT {r:?}@@");
}

fn is_root() -> bool {
    shmlink_sys::cred::current_uid() == 0
}

fn setpriv() -> Option<&'static str> {
    [
        "/usr/bin/setpriv",
        "/bin/setpriv",
        "/usr/sbin/setpriv",
        "/sbin/setpriv",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
}

/// Runs the client role as uid/gid 65534 against `addr`; returns the
/// child's RESULT text.
fn run_as_nobody(dir: &TempDir, addr: &str) -> String {
    run_as_nobody_role(dir, &format!("uidclient|{addr}"))
}

/// Runs `role` as uid/gid 65534; returns the child's RESULT text.
fn run_as_nobody_role(dir: &TempDir, role: &str) -> String {
    let copy = dir.join("hs-child");
    if !copy.exists() {
        let exe = std::env::current_exe().expect("current exe");
        fs::copy(&exe, &copy).expect("copy test binary");
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).expect("chmod exe");
    }
    // Another test's child forked while the copy was open for writing holds
    // that descriptor until it execs: exec fails with ETXTBSY meanwhile.
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = Command::new(setpriv().expect("setpriv"))
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&copy)
            .args(["--exact", "role_child", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .output()
            .expect("run child");
        let busy = String::from_utf8_lossy(&out.stderr).contains("Text file busy");
        if !busy || Instant::now() >= deadline {
            break out;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(start) = stdout.find("@@RESULT ") else {
        panic!(
            "child printed no result (status {:?})\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let rest = &stdout[start + 9..];
    rest[..rest.find("@@").expect("end marker")].to_string()
}

fn uid_test_server(allowed_uids: Vec<u32>, allowed_gids: Vec<u32>) -> Srv {
    let srv = start(
        T::Shm,
        ServerOptions {
            allowed_uids,
            allowed_gids,
            socket_mode: Some(0o666),
            ..Default::default()
        },
        echo,
    );
    fs::set_permissions(srv.dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod dir");
    srv
}

fn non_root_note(test: &str) -> bool {
    if is_root() && setpriv().is_some() {
        return false;
    }
    eprintln!(
        "NOTE {test}: not running as root (uid {}) or setpriv missing ({:?}): cannot run a client \
         as uid 65534; checking only that the server's own uid is accepted",
        shmlink_sys::cred::current_uid(),
        setpriv()
    );
    let srv = uid_test_server(vec![], vec![]);
    let mut c = connect(&srv.addr, ClientOptions::default());
    assert_eq!(
        c.call(b"own uid").expect("own uid is always allowed"),
        xform(b"own uid")
    );
    true
}

#[test]
fn other_uid_is_refused() {
    watchdog("other_uid_is_refused", LIMIT, || {
        if non_root_note("other_uid_is_refused") {
            return;
        }
        let srv = uid_test_server(vec![], vec![]);
        let result = run_as_nobody(&srv.dir, &srv.addr);
        eprintln!("child as 65534 got: {result}");
        assert!(
            result.starts_with("Err(Refused") && result.contains("NotAllowed"),
            "expected Refused(NotAllowed): {result}"
        );
        assert!(
            result.contains("65534"),
            "the refusal names the uid: {result}"
        );
        assert_eq!(srv.stats().refused.load(Ordering::Relaxed), 1);
        assert_eq!(srv.stats().sessions_opened.load(Ordering::Relaxed), 0);
    });
}

/// A uid the session policy allows may call, not inspect: an inspection
/// shows every session's peer, so only the server's uid or root may ask.
#[test]
fn inspection_by_another_uid_is_refused() {
    watchdog("inspection_by_another_uid_is_refused", LIMIT, || {
        if non_root_note("inspection_by_another_uid_is_refused") {
            return;
        }
        let srv = uid_test_server(vec![65534], vec![]);
        let called = run_as_nobody(&srv.dir, &srv.addr);
        assert_eq!(called, format!("Ok({:?})", xform(b"from-65534")));
        let result = run_as_nobody_role(&srv.dir, &format!("uidinspect|{}", srv.addr));
        assert!(
            result.starts_with("Err(Refused") && result.contains("NotAllowed"),
            "expected Refused(NotAllowed): {result}"
        );
        assert!(
            result.contains("refused inspection by uid 65534")
                && result.contains("(the server's) or root may inspect"),
            "the refusal names the uid and the rule: {result}"
        );
        // Root (the server's uid here) may.
        let report = shmlink::inspect(&srv.addr, Duration::from_secs(5)).expect("inspect");
        assert_eq!(report.totals.calls, 1);
    });
}

#[test]
fn allowed_uid_and_gid_are_accepted() {
    watchdog("allowed_uid_and_gid_are_accepted", LIMIT, || {
        if non_root_note("allowed_uid_and_gid_are_accepted") {
            return;
        }
        for (uids, gids) in [(vec![65534], vec![]), (vec![], vec![65534])] {
            let srv = uid_test_server(uids.clone(), gids.clone());
            let result = run_as_nobody(&srv.dir, &srv.addr);
            let want = format!("Ok({:?})", xform(b"from-65534"));
            assert_eq!(result, want, "uids {uids:?} gids {gids:?}");
            assert_eq!(srv.stats().refused.load(Ordering::Relaxed), 0);
            assert_eq!(srv.stats().calls.load(Ordering::Relaxed), 1);
        }
    });
}

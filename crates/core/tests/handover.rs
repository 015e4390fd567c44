//! A successor fed a hostile hand-over (docs/protocol.md, "Hand-over"):
//! garbage, a refusal, a truncated offer, descriptors of the wrong kind.
//! Each `Server::take_over` fails with an error naming what was wrong,
//! binds nothing, and answers the fake server with a refusal where it got
//! that far. (The server's side, and real upgrades under load:
//! `crates/cli/tests/handover.rs`.)

mod support;

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::thread;

use shmlink::wire::handover::{
    encode_refusal, is_refusal, ListenerKind, ListenerRecord, Offer, SessionRecord, ASK_LEN, END,
    SESSION_STREAM,
};
use shmlink::{Server, ServerOptions};
use support::TempDir;

/// A fake server at `path`: reads the ask, runs `script` on the
/// connection, then returns what the successor answered (its bytes until
/// it closed).
fn fake(
    path: &Path,
    script: impl FnOnce(&UnixStream) + Send + 'static,
) -> thread::JoinHandle<Vec<u8>> {
    let l = UnixListener::bind(path).expect("bind the fake");
    thread::spawn(move || {
        let (s, _) = l.accept().expect("accept the successor");
        let mut ask = [0u8; ASK_LEN];
        (&s).read_exact(&mut ask).expect("the ask");
        assert_eq!(&ask[..8], b"SLHOASK\0");
        script(&s);
        let mut answer = Vec::new();
        let _ = (&s).read_to_end(&mut answer);
        answer
    })
}

/// Sends `bytes` with `fds`. The successor may refuse and close before the
/// fake is done (it stops reading at the first thing wrong): a write that
/// finds the socket closed is not the fake's failure.
fn send(s: &UnixStream, bytes: &[u8], fds: &[&OwnedFd]) {
    let fds: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    if let Ok(n) = shmlink_sys::fdpass::send_with_fds(s, bytes, &fds) {
        let _ = (&*s).write_all(&bytes[n..]);
    }
}

fn take_over(path: &Path) -> String {
    match Server::take_over(path, ServerOptions::default()) {
        Ok(_) => panic!("took over from a fake"),
        Err(e) => e.to_string(),
    }
}

fn offer(listeners: u16, sessions: u32) -> [u8; 32] {
    offer_of(1, listeners, sessions)
}

fn offer_of(version: u16, listeners: u16, sessions: u32) -> [u8; 32] {
    Offer {
        version,
        listeners,
        sessions,
        next_session: 5,
    }
    .encode()
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let (r, w) = std::io::pipe().expect("pipe");
    (r.into(), w.into())
}

#[test]
fn garbage_a_refusal_and_a_truncated_offer_are_named() {
    let dir = TempDir::new("handover-fake");
    let path: PathBuf = dir.join("h.sock");
    let f = fake(&path, |s| (&*s).write_all(&[0x41; 32]).expect("garbage"));
    let e = take_over(&path);
    assert!(e.contains("hand-over offer starts"), "{e}");
    f.join().expect("fake");
    std::fs::remove_file(&path).expect("rm");

    let f = fake(&path, |s| {
        (&*s)
            .write_all(&encode_refusal("not now"))
            .expect("refusal")
    });
    let e = take_over(&path);
    assert!(e.contains("the server refused: not now"), "{e}");
    f.join().expect("fake");
    std::fs::remove_file(&path).expect("rm");

    // The head of an offer, then the server's end of the socket shuts.
    let f = fake(&path, |s| {
        (&*s).write_all(&offer(1, 0)).expect("offer");
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    });
    let e = take_over(&path);
    assert!(e.contains("the server closed the connection"), "{e}");
    f.join().expect("fake");
    std::fs::remove_file(&path).expect("rm");

    let e = take_over(&dir.join("nobody.sock"));
    assert!(e.contains("cannot take the server over: connecting"), "{e}");
}

#[test]
fn descriptors_of_the_wrong_kind_are_refused() {
    let dir = TempDir::new("handover-kinds");
    let path: PathBuf = dir.join("h.sock");
    // A pipe where a listening socket should be.
    let f = fake(&path, |s| {
        (&*s).write_all(&offer(1, 0)).expect("offer");
        let (r, _w) = pipe();
        let rec = ListenerRecord {
            kind: ListenerKind::Unix,
            address: "unix:/tmp/never.sock".into(),
        };
        send(s, &rec.encode(), &[&r]);
        send(s, &END, &[]);
    });
    let e = take_over(&path);
    assert!(e.contains("unix:/tmp/never.sock"), "{e}");
    f.join().expect("fake");
    std::fs::remove_file(&path).expect("rm");

    // A real listener, then a session whose "memfd" is a pipe: the
    // successor refuses the offer, naming the session, and says so.
    let real = dir.join("a.sock");
    let listener = UnixListener::bind(&real).expect("bind a listener");
    let address = format!("shm:{}", real.display());
    let f = fake(&path, move |s| {
        (&*s).write_all(&offer(1, 1)).expect("offer");
        let rec = ListenerRecord {
            kind: ListenerKind::Shm,
            address,
        };
        send(s, &rec.encode(), &[&OwnedFd::from(listener)]);
        let (ctrl, _peer) = UnixStream::pair().expect("pair");
        let (r, _w) = pipe();
        let session = SessionRecord {
            id: 1,
            caps: 1,
            peer_max: 1 << 20,
            ring_c2s: 1 << 16,
            ring_s2c: 1 << 16,
            flags: 0,
            listener: 0,
            epochs: (0, 0),
            read_ahead: 0,
        };
        send(s, &session.encode(), &[&OwnedFd::from(ctrl), &r]);
        send(s, &END, &[]);
    });
    let e = take_over(&path);
    assert!(e.contains("session 1"), "{e}");
    let answer = f.join().expect("fake");
    assert!(is_refusal(&answer), "the successor answered {answer:02x?}");
    assert!(String::from_utf8_lossy(&answer).contains("session 1"));
}

/// A stream session record (version 2) whose one descriptor is `fd`, with
/// `read_ahead` bytes after it, offered through a real `unix:` listener.
fn stream_offer(
    dir: &Path,
    path: &Path,
    version: u16,
    fd: OwnedFd,
    read_ahead: &'static [u8],
) -> thread::JoinHandle<Vec<u8>> {
    let real = dir.join(format!("u{version}-{}.sock", read_ahead.len()));
    let listener = UnixListener::bind(&real).expect("bind a listener");
    let address = format!("unix:{}", real.display());
    fake(path, move |s| {
        (&*s).write_all(&offer_of(version, 1, 1)).expect("offer");
        let rec = ListenerRecord {
            kind: ListenerKind::Unix,
            address,
        };
        send(s, &rec.encode(), &[&OwnedFd::from(listener)]);
        let session = SessionRecord {
            id: 1,
            caps: 1,
            peer_max: 1 << 20,
            ring_c2s: 0,
            ring_s2c: 0,
            flags: SESSION_STREAM,
            listener: 0,
            epochs: (0, 0),
            read_ahead: read_ahead.len() as u32,
        };
        send(s, &session.encode(), &[&fd]);
        (&*s).write_all(read_ahead).expect("read ahead");
        send(s, &END, &[]);
    })
}

#[test]
fn stream_sessions_of_the_wrong_kind_or_version_are_refused() {
    let dir = TempDir::new("handover-streams");
    let path: PathBuf = dir.join("h.sock");
    // A stream session in an offer of version 1 (which has none).
    let (sock, _peer) = UnixStream::pair().expect("pair");
    let f = stream_offer(dir.path(), &path, 1, sock.into(), b"");
    let e = take_over(&path);
    assert!(e.contains("stream session in an offer of version 1"), "{e}");
    f.join().expect("fake");
    std::fs::remove_file(&path).expect("rm");

    // A pipe where the session's connected socket should be; bytes read
    // ahead come along and are read past.
    let (r, _w) = pipe();
    let f = stream_offer(dir.path(), &path, 2, r, b"0123456789");
    let e = take_over(&path);
    assert!(
        e.contains("session 1") && e.contains("not a connected Unix stream socket"),
        "{e}"
    );
    let answer = f.join().expect("fake");
    assert!(is_refusal(&answer), "the successor answered {answer:02x?}");
    std::fs::remove_file(&path).expect("rm");

    // A listening socket is not a connected one either.
    let other = UnixListener::bind(dir.join("other.sock")).expect("bind");
    let f = stream_offer(dir.path(), &path, 2, other.into(), b"");
    let e = take_over(&path);
    assert!(e.contains("not a connected Unix stream socket"), "{e}");
    f.join().expect("fake");
    std::fs::remove_file(&path).expect("rm");

    // A TCP socket where a Unix one should be.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("tcp");
    let conn = std::net::TcpStream::connect(tcp.local_addr().expect("addr")).expect("connect");
    let f = stream_offer(dir.path(), &path, 2, conn.into(), b"x");
    let e = take_over(&path);
    assert!(e.contains("a Tcp socket, not a connected Unix"), "{e}");
    f.join().expect("fake");
}

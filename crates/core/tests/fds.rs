//! File descriptors with calls (capability bit 4): over `shm:` (through the
//! control socket) and `unix:` (with the frame's bytes) the handler gets
//! them, owned, in order, alongside pipelined and chunked calls; over
//! `tcp:`, to a server that refuses them, or beyond the limit, the call
//! fails before anything is sent and the session goes on; descriptors a
//! handler does not keep are closed; a peer that announces descriptors it
//! does not send loses its session.

mod support;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

use shmlink::wire::{FrameHeader, Kind, CAPS, CAP_FDS};
use shmlink::{Error, RemoteError, ServerOptions, WithFds, MAX_FDS};
use support::raw::{hello, RawSession};
use support::{connect, opts_timeout, start, wait_until, TempDir, T};

/// Tests that count this process's descriptors run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Descriptors of this process open on `path`.
fn open_fds_to(path: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == path))
            .count()
    })
}

/// A file holding `text`, read from its start by whoever gets its descriptor.
fn file_with(dir: &TempDir, name: &str, text: &str) -> File {
    let path = dir.join(name);
    let mut f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create file");
    f.write_all(text.as_bytes()).expect("write file");
    f
}

/// A handler answering with the request, then the contents of every file it
/// was handed, each after a `|`.
fn reading_handler() -> impl shmlink::Handler {
    WithFds(|req: &[u8], fds: Vec<OwnedFd>, resp: &mut Vec<u8>| {
        resp.extend_from_slice(req);
        for fd in fds {
            let mut f = File::from(fd);
            f.seek(SeekFrom::Start(0))
                .map_err(|e| RemoteError::new(1, e.to_string()))?;
            resp.push(b'|');
            f.read_to_end(resp)
                .map_err(|e| RemoteError::new(1, e.to_string()))?;
        }
        Ok(())
    })
}

fn handler_reads_the_files(t: T) {
    let srv = start(t, ServerOptions::default(), reading_handler());
    let dir = TempDir::new("fds");
    let files: Vec<File> = (0..3)
        .map(|i| file_with(&dir, &format!("f{i}"), &format!("file {i}")))
        .collect();
    let fds: Vec<BorrowedFd<'_>> = files.iter().map(|f| f.as_fd()).collect();
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
    assert_eq!(
        c.call_with_fds(b"one", &fds[..1]).expect("one fd"),
        b"one|file 0"
    );
    assert_eq!(
        c.call_with_fds(b"three", &fds).expect("three fds"),
        b"three|file 0|file 1|file 2"
    );
    // Calls without descriptors between them, and the most a message may carry.
    assert_eq!(c.call(b"none").expect("no fd"), b"none");
    let many = vec![files[1].as_fd(); MAX_FDS];
    let got = c.call_with_fds(b"max", &many).expect("MAX_FDS fds");
    assert_eq!(got.split(|&b| b == b'|').count(), MAX_FDS + 1);
    // Pipelined: each call's descriptors stay with it.
    let ids: Vec<_> = (0..20)
        .map(|i| {
            let req = format!("p{i}");
            c.send_with_fds(req.as_bytes(), &fds[i % 3..i % 3 + 1])
                .expect("send")
        })
        .collect();
    for _ in 0..ids.len() {
        let r = c.recv().expect("recv");
        let i = ids
            .iter()
            .position(|&id| id == r.id)
            .expect("a call in flight");
        let want = format!("p{i}|file {}", i % 3);
        assert_eq!(r.result.expect("ok"), want.as_bytes());
    }
    // A request streamed in chunks carries its descriptors once.
    let big = vec![b'x'; 3 << 20];
    let got = c.call_with_fds(&big, &fds[2..]).expect("chunked call");
    assert_eq!(got.len(), big.len() + "|file 2".len());
    assert!(got.ends_with(b"|file 2"));
    // Ours stay open.
    for f in &files {
        f.try_clone().expect("still open");
    }
}

fn handler_may_write_to_a_pipe(t: T) {
    let srv = start(
        t,
        ServerOptions::default(),
        WithFds(|req: &[u8], fds: Vec<OwnedFd>, resp: &mut Vec<u8>| {
            for fd in fds {
                File::from(fd)
                    .write_all(req)
                    .map_err(|e| RemoteError::new(2, e.to_string()))?;
            }
            resp.extend_from_slice(b"written");
            Ok(())
        }),
    );
    let (mut r, w) = std::io::pipe().expect("pipe");
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
    assert_eq!(
        c.call_with_fds(b"through the pipe", &[w.as_fd()])
            .expect("call"),
        b"written"
    );
    drop(w);
    let mut got = String::new();
    r.read_to_string(&mut got).expect("read pipe");
    assert_eq!(got, "through the pipe");
}

fn refused_before_sending(t: T) {
    let dir = TempDir::new("fds-refused");
    let f = file_with(&dir, "f", "x");
    // A server that takes no descriptors (over tcp: none can).
    let srv = start(
        t,
        ServerOptions {
            accept_fds: t == T::Tcp,
            ..ServerOptions::default()
        },
        reading_handler(),
    );
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
    let e = c.call_with_fds(b"x", &[f.as_fd()]).expect_err("refused");
    match (t, &e) {
        (T::Tcp, Error::Unsupported { what, .. }) => assert_eq!(*what, "file descriptors"),
        (T::Shm | T::Unix, Error::NotAgreed { capability, .. }) => {
            assert!(capability.contains("capability bit 4"), "{e}")
        }
        _ => panic!("{t:?}: unexpected error {e}"),
    }
    assert!(e.to_string().contains("nothing was sent"), "{e}");
    assert!(!e.is_fatal());
    let e = c.send_with_fds(b"x", &[f.as_fd()]).expect_err("refused");
    assert!(!e.is_fatal(), "{e}");
    assert_eq!(c.call(b"still usable").expect("call"), b"still usable");
    assert_eq!(
        srv.stats().calls.load(std::sync::atomic::Ordering::Acquire),
        1
    );
}

fn too_many_refused(t: T) {
    let srv = start(t, ServerOptions::default(), reading_handler());
    let dir = TempDir::new("fds-many");
    let f = file_with(&dir, "f", "x");
    let many = vec![f.as_fd(); MAX_FDS + 1];
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
    let e = c.call_with_fds(b"x", &many).expect_err("too many");
    assert!(matches!(e, Error::BadFds { .. }), "{e}");
    assert!(e.to_string().contains("at most 64"), "{e}");
    assert_eq!(c.call(b"ok").expect("call"), b"ok");
}

fn unkept_descriptors_are_closed(t: T) {
    let srv = start(
        t,
        ServerOptions::default(),
        |req: &[u8], resp: &mut Vec<u8>| {
            resp.extend_from_slice(req);
            Ok(())
        },
    );
    let dir = TempDir::new("fds-closed");
    let f = file_with(&dir, "f", "x");
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
    c.call(b"warm up").expect("call");
    // Descriptors of this file only: the server's segment preparer opens
    // and closes memfds of its own meanwhile.
    let path = dir.join("f");
    assert_eq!(open_fds_to(&path), 1, "ours");
    for _ in 0..50 {
        let fds = [f.as_fd(), f.as_fd(), f.as_fd()];
        assert_eq!(c.call_with_fds(b"ignored", &fds).expect("call"), b"ignored");
    }
    assert_eq!(
        open_fds_to(&path),
        1,
        "a handler that ignores descriptors leaves none open"
    );
}

/// A hand-made client that agreed on descriptors announces some in a frame
/// and sends none: the server ends the session with a protocol error and
/// keeps serving others.
fn announced_but_never_sent(t: T) {
    let srv = start(t, ServerOptions::default(), reading_handler());
    let mut h = hello(t);
    h.caps = CAPS | CAP_FDS;
    let (_, s) = RawSession::open(&srv.addr, &h);
    let mut s = s.expect("accepted");
    let frame = FrameHeader {
        fds: 2,
        ..FrameHeader::whole(Kind::Request, 1, 4)
    };
    s.send(frame, b"ping");
    let needle = if t == T::Shm {
        "no descriptor record"
    } else {
        "2 file descriptors, 0 arrived"
    };
    s.expect_protocol_goodbye(needle, &format!("{t:?} fds never sent"));
    wait_until("the session counted closed", Duration::from_secs(5), || {
        srv.stats()
            .sessions_closed
            .load(std::sync::atomic::Ordering::Acquire)
            == 1
    });
    let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
    assert_eq!(c.call(b"others go on").expect("call"), b"others go on");
}

/// The tests of a transport that passes descriptors, each under the
/// watchdog and one at a time (one counts the process's descriptors).
macro_rules! per_fd_transport {
    ($t:ident) => {
        #[test]
        fn handler_reads_the_files() {
            let _g = serial();
            support::watchdog("fds", support::LIMIT, || {
                super::handler_reads_the_files(T::$t)
            });
        }
        #[test]
        fn handler_may_write_to_a_pipe() {
            let _g = serial();
            support::watchdog("fds", support::LIMIT, || {
                super::handler_may_write_to_a_pipe(T::$t)
            });
        }
        #[test]
        fn refused_before_sending() {
            let _g = serial();
            support::watchdog("fds", support::LIMIT, || {
                super::refused_before_sending(T::$t)
            });
        }
        #[test]
        fn too_many_refused() {
            let _g = serial();
            support::watchdog("fds", support::LIMIT, || super::too_many_refused(T::$t));
        }
        #[test]
        fn unkept_descriptors_are_closed() {
            let _g = serial();
            support::watchdog("fds", support::LIMIT, || {
                super::unkept_descriptors_are_closed(T::$t)
            });
        }
        #[test]
        fn announced_but_never_sent() {
            let _g = serial();
            support::watchdog("fds", support::LIMIT, || {
                super::announced_but_never_sent(T::$t)
            });
        }
    };
}

mod shm {
    use super::*;
    per_fd_transport!(Shm);
}

mod unix {
    use super::*;
    per_fd_transport!(Unix);
}

mod tcp {
    use super::*;
    #[test]
    fn refused_before_sending() {
        let _g = serial();
        super::refused_before_sending(T::Tcp);
    }
    #[test]
    fn too_many_refused_first_as_unsupported() {
        let _g = serial();
        let srv = start(T::Tcp, ServerOptions::default(), super::reading_handler());
        let dir = TempDir::new("fds-tcp");
        let f = file_with(&dir, "f", "x");
        let many = vec![f.as_fd(); MAX_FDS + 1];
        let mut c = connect(&srv.addr, opts_timeout(Duration::from_secs(10)));
        let e = c.call_with_fds(b"x", &many).expect_err("tcp");
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    }
}

//! A server whose process may not make shared memory (a seccomp policy, as
//! a container runtime sets one) still serves its `shm:` clients: each
//! session continues over its socket with the same API and a logged
//! reason, a client that requires shared memory is refused with that
//! reason, and nothing leaks however many sessions come.
//!
//! Two causes are forced, each in a server process of its own (the test
//! binary re-run with `SHMLINK_DENIED_ROLE` set, as `reuse.rs` does):
//! `memfd_create` failing with `EPERM`, and every file-backed `mmap`
//! failing with `ENOMEM` (the memfd is made, mapping it fails). The filter
//! is installed on every thread of the server process before the server
//! starts; the test process (the client) is not filtered.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use shmlink::{Client, ClientOptions, Error, Log, RefusalCode, ServerOptions, Transport};
use support::child::{self, Peer};
use support::{wait_until, watchdog, xform, Rng, TempDir, LIMIT};

const ROLE: &str = "SHMLINK_DENIED_ROLE";
const STEP: Duration = Duration::from_secs(20);

fn opts(shm_required: bool) -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(10),
        shm_required,
        ..ClientOptions::default()
    }
}

/// Calls of several sizes, streamed whole and in chunks, all answer.
fn works(c: &mut Client, seed: u64) {
    let mut rng = Rng::new(seed);
    for len in [0, 100, 70_000, 3 << 20] {
        let req = rng.bytes(len);
        assert_eq!(c.call(&req).expect("call"), xform(&req), "{len} bytes");
    }
}

/// Descriptors the process `pid` holds.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or_else(|e| panic!("/proc/{pid}/fd: {e}"))
}

/// Runs one cause: the server denied it in a child process, then clients.
fn denied(cause: &str, reason: &str) {
    let dir = TempDir::new("denied");
    let bind = format!("shm:{}", dir.join("s.sock").display());
    let mut srv = Peer::spawn(ROLE, &format!("{cause}|{bind}"));
    let addr = srv.expect("READY", STEP);

    // The session continues over its socket, with the same API.
    let mut c = Client::connect(&addr, opts(false)).expect("connect");
    assert_eq!(c.transport(), Transport::Unix, "fell back to the socket");
    works(&mut c, 1);
    let line = srv.expect("LOG", STEP);
    assert!(line.contains("continues over its socket"), "{line}");
    assert!(line.contains(reason), "the reason names {reason:?}: {line}");
    drop(c);

    // A client that requires shared memory is refused with the reason.
    match Client::connect(&addr, opts(true)) {
        Err(Error::Refused { code, message, .. }) => {
            assert_eq!(code, RefusalCode::ServerFailure);
            assert!(message.contains(reason), "{message}");
        }
        r => panic!("expected a refusal, got {:?}", r.map(|c| c.transport())),
    }

    // Many sessions, one after another and several at once: all work, and
    // the server's descriptors come back to what they were.
    let closed = |srv: &mut Peer| -> u64 {
        srv.send("closed");
        srv.expect("CLOSED", STEP).parse().expect("a count")
    };
    // The refused connection never became a session.
    wait_until("the first session ended", STEP, || closed(&mut srv) >= 1);
    let before = open_fds(srv.pid());
    for round in 0..8u64 {
        let mut group: Vec<Client> = (0..4)
            .map(|_| Client::connect(&addr, opts(false)).expect("connect"))
            .collect();
        for (i, c) in group.iter_mut().enumerate() {
            assert_eq!(c.transport(), Transport::Unix);
            let req = Rng::new(round * 4 + i as u64).bytes(2048);
            assert_eq!(c.call(&req).expect("call"), xform(&req));
        }
    }
    wait_until("every session ended", STEP, || closed(&mut srv) >= 33); // the first and 32 more
                                                                        // At most as many as before: `before` may still count a descriptor on
                                                                        // its way out (seen under AddressSanitizer: 10 before, 9 after).
    let after = open_fds(srv.pid());
    assert!(
        after <= before,
        "descriptors left behind: {after} open, {before} before"
    );
    srv.drain_check();
}

#[test]
fn a_server_denied_memfd_create_serves_over_the_socket() {
    watchdog("memfd", LIMIT, || denied("memfd", "memfd_create"));
}

#[test]
fn a_server_denied_mmap_serves_over_the_socket() {
    watchdog("mmap", LIMIT, || denied("mmap", "mmap"));
}

// ---------- the child side ----------

/// Entry point of the server processes; a no-op in a normal test run.
#[test]
fn role_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let (cause, bind) = role.split_once('|').expect("cause|bind");
    deny(cause);
    let opts = ServerOptions {
        log: Log::to(|l| println!("@@LOG {l}@@")),
        ..ServerOptions::default()
    };
    let server = child::echo_server(bind, opts);
    for cmd in std::io::stdin().lines().map_while(Result::ok) {
        match cmd.as_str() {
            "closed" => {
                let n = server
                    .stats()
                    .sessions_closed
                    .load(std::sync::atomic::Ordering::Acquire);
                println!("@@CLOSED {n}@@");
            }
            other => panic!("unknown server command {other:?}"),
        }
    }
    server.stop().expect("child stop");
}

/// Installs, on every thread of this process, a filter that fails
/// `memfd_create` (`memfd`) or every `mmap` of a file (`mmap`).
fn deny(cause: &str) {
    let (nr, rules, errno) = match cause {
        // No rule: every call matches.
        "memfd" => (libc::SYS_memfd_create, vec![], libc::EPERM),
        // The fd argument (index 4) is not -1: a file mapping. Anonymous
        // mappings (the allocator's, thread stacks) still work.
        "mmap" => {
            let fd = SeccompCondition::new(
                4,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                u64::from(u32::MAX),
            )
            .expect("condition");
            let rule = SeccompRule::new(vec![fd]).expect("rule");
            (libc::SYS_mmap, vec![rule], libc::ENOMEM)
        }
        other => panic!("unknown cause {other:?}"),
    };
    let filter = SeccompFilter::new(
        BTreeMap::from([(nr, rules)]),
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        std::env::consts::ARCH.try_into().expect("a known arch"),
    )
    .expect("filter");
    let program: BpfProgram = filter.try_into().expect("program");
    seccompiler::apply_filter_all_threads(&program).expect("install the filter");
}

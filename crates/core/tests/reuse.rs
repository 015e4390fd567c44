//! A server keeps the segment of an `shm:` session its client ended with a
//! `Goodbye` for that client process's next session, and for no one else.
//!
//! What a client process can see is the memfd it has mapped: its inode, in
//! the process's own `/proc/self/maps` (a process that is not also a server
//! maps exactly one `memfd:shmlink-session` per live `shm:` client). So the
//! server runs in another process: the test binary re-executes itself with
//! `SHMLINK_REUSE_ROLE` set (as `crash.rs` does), as a server that reports
//! its counters when asked on its stdin, or as a client process driven by
//! commands on its stdin. The test process is a client process too. What a
//! server holds is seen in `/proc/<server pid>/fd`: the memfds of its
//! sessions, prepared segments and kept segments, by inode.
//!
//! The client side keeps the mapping of a segment its session ended with a
//! goodbye (`kept.rs`), and takes it again when the same segment comes
//! back: a client's kept mappings are released (`release_kept_mappings`)
//! before looking for the live session's mapping, and checked where the
//! reuse happens.
//!
//! Every step that depends on the server having ended a session first waits
//! for its `sessions_closed` counter (the server keeps or frees a session's
//! segment before it counts the session closed).

mod support;

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use shmlink::wire::SegmentHeader;
use shmlink::{Client, ClientOptions, ServerOptions, Transport};
use support::child::{self, Peer};
use support::{wait_until, watchdog, xform, Rng, TempDir, LIMIT, T};

const ROLE: &str = "SHMLINK_REUSE_ROLE";
/// The default ring size, each way.
const RING: usize = shmlink::DEFAULT_RING_SIZE;
const STEP: Duration = Duration::from_secs(20);

/// The tests read this process's own mappings: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn opts(ring_size: usize) -> ClientOptions {
    ClientOptions {
        ring_size,
        timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

// ---------- what a process sees ----------

/// The inodes of the session segments this process has mapped.
fn mapped_segments() -> Vec<u64> {
    let maps = fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    maps.lines()
        .filter(|l| l.contains("memfd:shmlink-session"))
        .map(|l| {
            // address perms offset dev inode path
            let inode = l.split_whitespace().nth(4).expect("an inode column");
            inode.parse().expect("a decimal inode")
        })
        .collect()
}

/// The transport of a live client and, over `shm:`, the inode of its
/// segment (this process holds no other client while it asks; mappings
/// kept from earlier sessions are released first).
fn segment_of(c: &Client) -> (Transport, Option<u64>) {
    shmlink::release_kept_mappings();
    let mapped = mapped_segments();
    match c.transport() {
        Transport::Shm => {
            assert_eq!(mapped.len(), 1, "one shm client, one mapping: {mapped:?}");
            (Transport::Shm, Some(mapped[0]))
        }
        t => {
            assert!(
                mapped.is_empty(),
                "a {t:?} session maps nothing: {mapped:?}"
            );
            (t, None)
        }
    }
}

/// Calls that wrap both rings of a 64 KiB session several times over
/// (requests and responses of 20 to 40 KiB, under the arena threshold, so
/// they go through the rings), each answer checked.
fn exercise(c: &mut Client, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut moved = 0;
    for i in 0..16 {
        let len = if i == 0 {
            0
        } else {
            20_000 + rng.below(20_000) as usize
        };
        let req = rng.bytes(len);
        let resp = c.call(&req).unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert!(resp == xform(&req), "call {i} ({len} bytes): wrong answer");
        moved += len;
    }
    assert!(
        moved > 4 * RING,
        "the rings wrapped ({moved} bytes each way)"
    );
}

/// One whole session of this process: connects, checks calls work, ends it
/// with a goodbye (a plain drop). Returns the segment it had.
fn session(addr: &str, ring: usize, seed: u64) -> (Transport, Option<u64>) {
    let mut c = Client::connect(addr, opts(ring)).unwrap_or_else(|e| panic!("connect: {e}"));
    exercise(&mut c, seed);
    let seen = segment_of(&c);
    drop(c);
    let kept: Vec<u64> = seen.1.into_iter().collect();
    assert_eq!(
        mapped_segments(),
        kept,
        "the client's mapping is kept after its goodbye (shm), nothing else is mapped"
    );
    seen
}

/// A whole `shm:` session of this process; the inode of its segment.
fn shm_session(addr: &str, seed: u64) -> u64 {
    match session(addr, RING, seed) {
        (Transport::Shm, Some(ino)) => ino,
        other => panic!("expected shared memory, got {other:?}"),
    }
}

/// The inodes of the session memfds process `pid` holds open.
fn held_segments(pid: u32) -> HashSet<u64> {
    let dir = format!("/proc/{pid}/fd");
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {dir}: {e}"));
    entries
        .flatten()
        .filter(|e| {
            fs::read_link(e.path())
                .map(|l| l.to_string_lossy().starts_with("/memfd:shmlink-session"))
                .unwrap_or(false)
        })
        // An entry closed since it was listed is not held.
        .filter_map(|e| fs::metadata(e.path()).ok())
        .map(|m| m.ino())
        .collect()
}

// ---------- the child side ----------

/// Entry point of the child processes; a no-op in a normal test run.
#[test]
fn role_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let parts: Vec<&str> = role.split('|').collect();
    match parts.as_slice() {
        ["server", bind, limit] => child_server(bind, limit.parse().expect("limit")),
        ["client", addr] => child_client(addr),
        _ => panic!("unknown role {role:?}"),
    }
}

fn say(marker: &str) {
    println!("@@{marker}@@");
}

/// Commands from the parent, one a line, until it closes our stdin.
fn commands() -> impl Iterator<Item = String> {
    std::io::stdin().lines().map_while(Result::ok)
}

/// Serves an echo until stdin ends; `stats` answers with its counters.
fn child_server(bind: &str, max_shm_bytes: u64) {
    let opts = ServerOptions {
        max_shm_bytes,
        ..ServerOptions::default()
    };
    let server = child::echo_server(bind, opts);
    for cmd in commands() {
        match cmd.as_str() {
            "stats" => {
                let s = server.stats();
                let o = std::sync::atomic::Ordering::Acquire;
                say(&format!(
                    "STATS {} {} {}",
                    s.sessions_opened.load(o),
                    s.sessions_closed.load(o),
                    s.calls.load(o)
                ));
            }
            other => panic!("unknown server command {other:?}"),
        }
    }
    server.stop().expect("child stop");
}

/// A client process: `connect` (then calls, checked, and the session's
/// transport and segment reported), `drop` (a goodbye).
fn child_client(addr: &str) {
    let mut client = None;
    for (n, cmd) in commands().enumerate() {
        match cmd.as_str() {
            "connect" => {
                let mut c = Client::connect(addr, opts(RING)).expect("child connect");
                exercise(&mut c, 1000 + n as u64);
                let (t, ino) = segment_of(&c);
                let ino = ino.map_or_else(|| "none".to_string(), |i| i.to_string());
                client = Some(c);
                say(&format!("CONNECTED {} {ino}", t.scheme()));
            }
            "drop" => {
                drop(client.take().expect("a client to drop"));
                assert!(mapped_segments().len() <= 1, "one mapping kept at most");
                shmlink::release_kept_mappings();
                assert!(mapped_segments().is_empty(), "unmapped once released");
                say("DROPPED");
            }
            other => panic!("unknown client command {other:?}"),
        }
    }
}

// ---------- the parent side ----------

/// A server in a child process.
struct ChildServer {
    peer: Peer,
    addr: String,
    _dir: TempDir,
}

impl ChildServer {
    fn start(max_shm_bytes: u64) -> ChildServer {
        let dir = TempDir::new("reuse");
        let bind = T::Shm.bind_addr(&dir, "s");
        let mut peer = Peer::spawn(ROLE, &format!("server|{bind}|{max_shm_bytes}"));
        let addr = peer.expect("READY ", STEP);
        ChildServer {
            peer,
            addr,
            _dir: dir,
        }
    }

    /// The server's counters: sessions opened, sessions closed, calls
    /// answered.
    fn stats(&mut self) -> [u64; 3] {
        self.peer.send("stats");
        let s = self.peer.expect("STATS ", STEP);
        let n: Vec<u64> = s
            .split_whitespace()
            .map(|w| w.parse().expect("a count"))
            .collect();
        n.try_into().expect("three counts")
    }

    /// Sessions closed so far.
    fn closed(&mut self) -> u64 {
        self.stats()[1]
    }

    /// Waits until the server has ended `n` sessions in all (and kept or
    /// freed their segments).
    fn wait_closed(&mut self, n: u64) {
        wait_until(&format!("{n} sessions closed"), STEP, || self.closed() >= n);
    }

    /// Whether the server holds the memfd with this inode.
    fn holds(&self, ino: u64) -> bool {
        held_segments(self.peer.pid()).contains(&ino)
    }

    /// A client process of its own, waiting for commands.
    fn client_process(&self) -> Peer {
        Peer::spawn(ROLE, &format!("client|{}", self.addr))
    }
}

/// What a client process reported on `connect`: transport, segment.
fn child_connects(child: &mut Peer) -> (String, Option<u64>) {
    child.send("connect");
    let got = child.expect("CONNECTED ", STEP);
    let mut words = got.split_whitespace();
    let scheme = words.next().expect("a transport").to_string();
    let ino = words.next().expect("a segment").parse().ok();
    (scheme, ino)
}

fn child_drops(child: &mut Peer) {
    child.send("drop");
    child.expect("DROPPED", STEP);
}

// ---------- the tests ----------

/// (a) A process that connects, calls and says goodbye again and again
/// gets the same segment each time (calls on it work, the reused rings
/// wrapping several times); a session with other ring sizes gets another,
/// and the first is still kept for the process after it.
#[test]
fn a_process_gets_its_segment_back() {
    let _g = serial();
    watchdog("a_process_gets_its_segment_back", LIMIT, || {
        let mut srv = ChildServer::start(u64::MAX);
        let first = shm_session(&srv.addr, 1);
        srv.wait_closed(1);
        assert!(srv.holds(first), "the server kept the segment");
        for round in 2..=4 {
            // The kept mapping is taken, not a second one made.
            let mut c = Client::connect(&srv.addr, opts(RING)).expect("connect");
            assert_eq!(
                mapped_segments(),
                vec![first],
                "session {round}: one mapping"
            );
            exercise(&mut c, round);
            drop(c);
            assert_eq!(mapped_segments(), vec![first], "kept again");
            srv.wait_closed(round);
        }
        match session(&srv.addr, 2 * RING, 5) {
            (Transport::Shm, Some(other)) => assert_ne!(other, first, "other rings"),
            other => panic!("expected shared memory, got {other:?}"),
        }
        srv.wait_closed(5);
        assert_eq!(shm_session(&srv.addr, 6), first, "still kept");
    });
}

/// A kept segment goes after `KEEP_FOR` (2 s) with no traffic at all: the
/// idle server's memfds are back to what it held before the session
/// within `KEEP_FOR` + 1 s of its end.
#[test]
fn kept_segments_expire_without_traffic() {
    let _g = serial();
    watchdog("kept_segments_expire_without_traffic", LIMIT, || {
        let mut srv = ChildServer::start(u64::MAX);
        // The prepared segments of a fresh server, once it has made them
        // all (one at a time: two equal counts in a row may be half way,
        // on a slow machine).
        let mut fresh = HashSet::new();
        wait_until("the server's prepared segments", STEP, || {
            fresh = held_segments(srv.peer.pid());
            fresh.len() == shmlink::READY_SEGMENTS
        });
        let first = shm_session(&srv.addr, 1);
        srv.wait_closed(1);
        assert!(srv.holds(first), "the server kept the segment");
        let ended = std::time::Instant::now();
        let took = wait_until("the kept segment freed", STEP, || !srv.holds(first));
        let after = ended.elapsed();
        assert!(
            after <= Duration::from_secs(3),
            "kept {after:?} after the session ended ({took:?} of waiting)"
        );
        let pid = srv.peer.pid();
        wait_until("as many memfds as a fresh server", STEP, || {
            held_segments(pid).len() <= fresh.len()
        });
    });
}

/// (b) Another process never gets a segment kept for this one, though
/// it is there for the taking (same rings, no limit), and this one still
/// gets it back after; nor does this process get the other's.
#[test]
fn another_process_gets_another_segment() {
    let _g = serial();
    watchdog("another_process_gets_another_segment", LIMIT, || {
        let mut srv = ChildServer::start(u64::MAX);
        let mut child = srv.client_process();
        let mine = shm_session(&srv.addr, 1);
        srv.wait_closed(1);
        assert!(srv.holds(mine), "kept for this process");
        let (scheme, theirs) = child_connects(&mut child);
        assert_eq!(scheme, "shm");
        let theirs = theirs.expect("the child's segment");
        assert_ne!(theirs, mine, "the child got this process's segment");
        assert!(srv.holds(mine), "still kept for this process");
        // This process gets its own back while the child's session runs...
        assert_eq!(shm_session(&srv.addr, 2), mine, "this process's again");
        srv.wait_closed(2);
        // ...and again once the child's session ended and its segment is
        // kept for the child: never the child's.
        child_drops(&mut child);
        srv.wait_closed(3);
        assert!(srv.holds(theirs), "kept for the child");
        assert_eq!(shm_session(&srv.addr, 3), mine, "not the child's");
        // The child gets its own back.
        let (_, again) = child_connects(&mut child);
        assert_eq!(again, Some(theirs), "the child's again");
    });
}

/// (c) A session that ended without a goodbye is not kept: its segment
/// could still be in use by a process that went away mid-call, or (after
/// `Client::forget` in a forked child) by the process that still holds the
/// mapping. Two ways to end without a goodbye:
/// - this process's client forgotten: its socket closes and its mapping
///   goes, but no `Goodbye` is sent. This process's next session then gets
///   a new segment, and the server no longer holds the old one (after a
///   control showing that a goodbye-ended segment is held and reused);
/// - a client process killed (SIGKILL) with its session open, which can never
///   connect again: the server must not hold its segment once the session ended
///   (while the session ran, it did).
#[test]
fn a_session_ended_without_goodbye_is_not_kept() {
    let _g = serial();
    watchdog("a_session_ended_without_goodbye_is_not_kept", LIMIT, || {
        let mut srv = ChildServer::start(u64::MAX);
        let mut child = srv.client_process();
        // Control: ended by a goodbye, the segment is held and reused.
        let first = shm_session(&srv.addr, 1);
        srv.wait_closed(1);
        assert!(srv.holds(first), "a goodbye: kept");
        let mut c = Client::connect(&srv.addr, opts(RING)).expect("connect");
        exercise(&mut c, 2);
        assert_eq!(segment_of(&c), (Transport::Shm, Some(first)), "reused");
        // Ended without one: freed.
        c.forget();
        assert!(mapped_segments().is_empty(), "forget unmaps");
        srv.wait_closed(2);
        assert!(!srv.holds(first), "forgotten: the server freed it");
        let next = shm_session(&srv.addr, 3);
        assert_ne!(next, first, "forgotten: a new segment");
        srv.wait_closed(3);
        assert!(srv.holds(next), "a goodbye again: kept");
        // A client process killed mid-session.
        let (scheme, theirs) = child_connects(&mut child);
        assert_eq!(scheme, "shm");
        let theirs = theirs.expect("the child's segment");
        assert!(srv.holds(theirs), "the server holds a live session's memfd");
        child.kill();
        srv.wait_closed(4);
        assert!(!srv.holds(theirs), "killed: the server freed it");
        assert!(srv.holds(next), "this process's is still kept");
        assert_eq!(shm_session(&srv.addr, 5), next);
    });
}

/// (d) A kept segment stays counted against `max_shm_bytes`, but gives way
/// to a new session: with a limit of exactly one default segment, process
/// A's session ends (its segment kept and charged), then process B still
/// gets shared memory, not the socket fallback, and A's kept segment is
/// freed for it. The limit itself still holds while B's session runs.
#[test]
fn a_kept_segment_gives_way_at_the_limit() {
    let _g = serial();
    watchdog("a_kept_segment_gives_way_at_the_limit", LIMIT, || {
        let one = SegmentHeader::for_rings(RING, RING).total_len;
        let mut srv = ChildServer::start(one);
        let mut b = srv.client_process();
        let kept = shm_session(&srv.addr, 1);
        srv.wait_closed(1);
        assert!(srv.holds(kept), "A's segment is kept");
        let (scheme, theirs) = child_connects(&mut b);
        assert_eq!(scheme, "shm", "B got shared memory, not the fallback");
        assert_ne!(theirs, Some(kept));
        assert!(!srv.holds(kept), "A's kept segment was freed for B");
        // B's session holds the whole limit: A falls back to its socket.
        assert_eq!(
            session(&srv.addr, RING, 2),
            (Transport::Unix, None),
            "the limit holds"
        );
        srv.wait_closed(2);
        // B's segment, kept and charged, gives way to A's next session.
        child_drops(&mut b);
        srv.wait_closed(3);
        let theirs = theirs.expect("B's segment");
        assert!(srv.holds(theirs), "B's segment is kept");
        let again = shm_session(&srv.addr, 3);
        assert_ne!(again, theirs, "A never gets B's");
        assert!(!srv.holds(theirs), "B's kept segment was freed for A");
    });
}

/// (e) What a session leaves in its rings never reaches the next session on
/// the same segment: the responses to requests sent without waiting and
/// never received lie unread in the server-to-client ring when the client
/// says goodbye; the segment is kept all the same, and the next session on
/// it (the same inode) starts with empty rings: its calls get their own
/// answers, not the stale ones.
#[test]
fn what_a_session_left_unread_never_reaches_the_next() {
    let _g = serial();
    watchdog(
        "what_a_session_left_unread_never_reaches_the_next",
        LIMIT,
        || {
            let mut srv = ChildServer::start(u64::MAX);
            let mut c = Client::connect(&srv.addr, opts(RING)).expect("connect");
            let (_, left) = segment_of(&c);
            let left = left.expect("shared memory");
            for i in 0..3 {
                c.send(format!("never read {i}").as_bytes()).expect("send");
            }
            assert_eq!(c.in_flight(), 3);
            drop(c);
            srv.wait_closed(1);
            assert_eq!(srv.stats()[2], 3, "the server answered all three");
            let mut c = Client::connect(&srv.addr, opts(RING)).expect("connect");
            assert_eq!(segment_of(&c), (Transport::Shm, Some(left)), "reused");
            for i in 0..3 {
                let req = format!("fresh {i}");
                let resp = c.call(req.as_bytes()).expect("call");
                assert_eq!(resp, xform(req.as_bytes()), "call {i}: its own answer");
            }
            exercise(&mut c, 9);
        },
    );
}

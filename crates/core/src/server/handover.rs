//! The server's side of a hand-over (docs/protocol.md, "Hand-over"): a
//! successor connected to the hand-over socket; the monitor checks who it
//! is and what it speaks, stops every session at a message boundary
//! (each files its part in [`Handing`](super::handing::Handing)), sends the
//! listeners and sessions with their descriptors, and waits for the
//! successor's answer. Took: the server lets them go and stops, leaving
//! its socket files to the successor; anything else (a refusal, garbage,
//! a hang-up, a deadline): it serves on as before.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use shmlink_sys::fdpass;
use shmlink_wire::handover::{
    encode_refusal, is_refusal, Ask, ListenerKind, ListenerRecord, Offer, END, MARK_LEN, TOOK,
};

use super::handing::Verdict;
use super::listener::Listener;
use super::shared::Shared;
use super::takeover::read_refusal;
use crate::address::Transport;

/// How long the sessions have to reach a message boundary.
const QUIESCE: Duration = Duration::from_secs(2);
/// How long the successor has for each step (its ask, its answer).
const STEP: Duration = Duration::from_secs(5);

/// Runs a hand-over to the successor on `conn`; true when it took
/// everything (the server then stops).
pub(crate) fn give(sh: &Shared, listeners: &[Listener], conn: &UnixStream) -> bool {
    let name = listeners
        .first()
        .map_or_else(String::new, |l| l.address().to_string());
    let t0 = Instant::now();
    match hand(sh, listeners, conn, &name) {
        Ok((stopped, handed)) => {
            // Sessions not handed (stream sessions to a successor of
            // version 1, or without an interrupt) end as at a stop; their
            // clients reconnect to the successor.
            for (id, e) in sh.registry.snapshot() {
                if !handed.contains(&id) {
                    e.stop();
                }
            }
            sh.opts.log.write(&format!(
                "shmlink: server at {name} handed its listeners and sessions to a successor \
                 ({:.1} ms after it asked; its sessions stopped for the last {:.1} ms of it)",
                t0.elapsed().as_secs_f64() * 1e3,
                stopped.elapsed().as_secs_f64() * 1e3
            ));
            true
        }
        Err(why) => {
            sh.opts.log.write(&format!(
                "shmlink: server at {name}: hand-over refused: {why}"
            ));
            false
        }
    }
}

/// The steps; `Err` with the reason when the server keeps serving, `Ok`
/// with when the sessions were told to stop, and which were handed.
fn hand(
    sh: &Shared,
    listeners: &[Listener],
    conn: &UnixStream,
    name: &str,
) -> Result<(Instant, Vec<u64>), String> {
    let refuse = |why: String| {
        let _ = (&*conn).write_all(&encode_refusal(&why));
        why
    };
    let me = shmlink_sys::cred::current_uid();
    let cred = shmlink_sys::peer_cred(conn)
        .map_err(|e| format!("reading the successor's credentials: {e}"))?;
    if cred.uid != me && cred.uid != 0 {
        return Err(refuse(format!(
            "server at {name} refused a hand-over to uid {} (pid {}): only uid {me} or root may take it over",
            cred.uid, cred.pid
        )));
    }
    conn.set_read_timeout(Some(STEP))
        .map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(STEP))
        .map_err(|e| e.to_string())?;
    let mut ask = [0u8; shmlink_wire::handover::ASK_LEN];
    (&*conn)
        .read_exact(&mut ask)
        .map_err(|e| format!("reading the successor's ask: {e}"))?;
    let ask = Ask::decode(&ask).map_err(|e| refuse(e.to_string()))?;
    let Some(version) = ask.agree() else {
        return Err(refuse(format!(
            "server at {name} speaks hand-over versions {} to {}; the successor asked for {} to {}",
            shmlink_wire::handover::HANDOVER_MIN,
            shmlink_wire::handover::HANDOVER_MAX,
            ask.version_min,
            ask.version_max
        )));
    };
    // Direct lines lent stay with this server's handler (their far ends
    // are its workers): it takes them back after; the clients ask the
    // successor for new ones (docs/protocol.md, "Hand-over").
    sh.handing.begin();
    let stopped = Instant::now();
    // Version 1 hands `shm:` sessions only; version 2 stream sessions too.
    let handed =
        |e: &super::registry::Entry| e.segment().is_some() || (version >= 2 && e.can_hand_over());
    for (_, e) in sh.registry.snapshot() {
        if handed(&e) {
            e.hand_over();
        }
    }
    let expected = || {
        // Sessions still in their handshake file once established.
        let all = sh.registry.snapshot();
        (sh.slots_in_use() == all.len()).then(|| {
            all.iter()
                .filter(|(_, e)| handed(e))
                .map(|&(id, _)| id)
                .collect()
        })
    };
    let parts = match sh.handing.gather(expected, Instant::now() + QUIESCE) {
        Ok(parts) => parts,
        Err(why) => {
            resume(sh);
            return Err(refuse(format!(
                "server at {name} cannot hand over now: {why}"
            )));
        }
    };
    let sent = offer(sh, listeners, conn, version, &parts);
    if let Err(e) = sent {
        resume(sh);
        return Err(format!("sending the offer: {e}"));
    }
    let mut answer = [0u8; MARK_LEN];
    let took = (&*conn).read_exact(&mut answer).map(|()| answer == TOOK);
    match took {
        Ok(true) => {
            sh.handing.decide(Verdict::Took);
            Ok((stopped, parts.iter().map(|(id, _)| *id).collect()))
        }
        Ok(false) => {
            resume(sh);
            Err(if is_refusal(&answer) {
                read_refusal(conn, &answer, "the successor")
            } else {
                format!("the successor answered {answer:02x?}, neither took nor a refusal")
            })
        }
        Err(e) => {
            resume(sh);
            Err(format!("the successor did not answer: {e}"))
        }
    }
}

/// Lets every session serve on.
fn resume(sh: &Shared) {
    for (_, e) in sh.registry.snapshot() {
        e.flags
            .hand_over
            .store(false, std::sync::atomic::Ordering::Release);
    }
    sh.handing.decide(Verdict::Resume);
}

/// Sends the offer: its head, the listeners, the sessions, the end.
fn offer(
    sh: &Shared,
    listeners: &[Listener],
    conn: &UnixStream,
    version: u16,
    parts: &[(u64, super::handing::Parted)],
) -> std::io::Result<()> {
    let head = Offer {
        version,
        listeners: listeners.len() as u16,
        sessions: parts.len() as u32,
        next_session: sh.peek_next_session_id(),
    };
    (&*conn).write_all(&head.encode())?;
    for l in listeners {
        let kind = match l.transport() {
            Transport::Shm => ListenerKind::Shm,
            Transport::Unix => ListenerKind::Unix,
            Transport::Tcp => ListenerKind::Tcp,
        };
        let r = ListenerRecord {
            kind,
            address: l.address().to_string(),
        };
        send_with(conn, &r.encode(), &[l.as_fd()])?;
    }
    for (_, p) in parts {
        let mut r = p.record;
        // A session's name is its listener's address, then " session N".
        let of = |l: &Listener| {
            let a = l.address().to_string();
            p.address == a || p.address.starts_with(&format!("{a} "))
        };
        r.listener = listeners.iter().position(of).unwrap_or(0) as u16;
        let fds: Vec<BorrowedFd<'_>> = p.fds.iter().map(AsFd::as_fd).collect();
        send_with(conn, &r.encode(), &fds)?;
        (&*conn).write_all(&p.read_ahead)?;
    }
    (&*conn).write_all(&END)
}

/// Sends `bytes` with `fds` on the first of them.
fn send_with(conn: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    let n = fdpass::send_with_fds(conn, bytes, fds)?;
    (&*conn).write_all(&bytes[n..])
}

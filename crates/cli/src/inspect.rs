//! `shmlink inspect`: the sessions and totals of any running server built
//! on the library (capability bit 8), as a table or JSON.

use std::fmt::Write as _;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};
use shmlink::wire::{Report, ReportSession, FLAG_OVER_SOCKET, UID_UNKNOWN};

use crate::parse;

/// Options of `shmlink inspect`.
#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// The server's address: shm:PATH or unix:PATH (an inspection needs a
    /// Unix socket, and a process of the server's uid, or root).
    #[arg(value_name = "ADDR")]
    address: String,
    /// One JSON object: `server` (the totals) and `sessions`.
    #[arg(long)]
    json: bool,
    /// Seconds to wait for the connection and the report.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "5")]
    timeout: Duration,
}

/// Asks and prints.
pub(crate) fn run(args: &InspectArgs) -> anyhow::Result<()> {
    let report = shmlink::inspect(&args.address, args.timeout)?;
    let out = if args.json {
        let mut s = serde_json::to_string_pretty(&as_json(&args.address, &report))?;
        s.push('\n');
        s
    } else {
        table(&args.address, &report)
    };
    print!("{out}");
    Ok(())
}

fn as_json(address: &str, r: &Report) -> Value {
    let t = &r.totals;
    let sessions: Vec<Value> = r.sessions.iter().map(session_json).collect();
    json!({
        "server": {
            "address": address,
            "pid": t.server_pid,
            "uptime_ms": t.uptime_ms,
            "sessions_open": r.sessions.len(),
            "sessions_opened": t.sessions_opened,
            "sessions_closed": t.sessions_closed,
            "refused": t.refused,
            "calls": t.calls,
            "errors": t.errors,
            "shm_bytes": t.shm_bytes,
            "kept_segments": t.kept_segments,
            "kept_bytes": t.kept_bytes,
        },
        "sessions": sessions,
    })
}

fn session_json(s: &ReportSession) -> Value {
    let known = |v: u32, unknown: u32| (v != unknown).then_some(v);
    json!({
        "id": s.session_id,
        "transport": s.transport.scheme(),
        "over_socket": s.flags & FLAG_OVER_SOCKET != 0,
        "peer_pid": known(s.peer_pid, 0),
        "peer_uid": known(s.peer_uid, UID_UNKNOWN),
        "age_ms": s.age_ms,
        "messages_in": s.messages_in,
        "messages_out": s.messages_out,
        "bytes_in": s.bytes_in,
        "bytes_out": s.bytes_out,
        "ring_c2s": s.ring_c2s,
        "fill_c2s": s.fill_c2s,
        "ring_s2c": s.ring_s2c,
        "fill_s2c": s.fill_s2c,
        "arena_own_bytes": s.arena_own,
        "arena_peer_bytes": s.arena_peer,
    })
}

/// `1.5 KiB`, `3.0 MiB`: a byte count to read at a glance.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `250ms` under a second, else whole seconds as `3m12s`.
fn age(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    humantime::format_duration(Duration::from_secs(ms / 1000))
        .to_string()
        .replace(' ', "")
}

fn table(address: &str, r: &Report) -> String {
    let t = &r.totals;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "server pid {} at {address}, up {}: {} sessions open ({} opened, {} closed, {} refused); \
         {} calls ({} errors); shared memory {} held, {} segments kept ({})",
        t.server_pid,
        age(t.uptime_ms),
        r.sessions.len(),
        t.sessions_opened,
        t.sessions_closed,
        t.refused,
        t.calls,
        t.errors,
        bytes(t.shm_bytes),
        t.kept_segments,
        bytes(t.kept_bytes),
    );
    if r.sessions.is_empty() {
        return out;
    }
    let head = [
        "SESSION",
        "TRANSPORT",
        "PID",
        "UID",
        "AGE",
        "IN",
        "OUT",
        "BYTES IN",
        "BYTES OUT",
        "RING C2S",
        "RING S2C",
        "ARENA",
    ];
    let rows: Vec<[String; 12]> = r
        .sessions
        .iter()
        .map(|s| {
            let ring = |fill, size| {
                if size == 0 {
                    "-".to_string()
                } else {
                    format!("{}/{}", bytes(u64::from(fill)), bytes(u64::from(size)))
                }
            };
            let transport = if s.flags & FLAG_OVER_SOCKET != 0 {
                format!("{} (socket)", s.transport.scheme())
            } else {
                s.transport.scheme().to_string()
            };
            [
                s.session_id.to_string(),
                transport,
                if s.peer_pid == 0 {
                    "-".into()
                } else {
                    s.peer_pid.to_string()
                },
                if s.peer_uid == UID_UNKNOWN {
                    "-".into()
                } else {
                    s.peer_uid.to_string()
                },
                age(s.age_ms),
                s.messages_in.to_string(),
                s.messages_out.to_string(),
                bytes(s.bytes_in),
                bytes(s.bytes_out),
                ring(s.fill_c2s, s.ring_c2s),
                ring(s.fill_s2c, s.ring_s2c),
                format!("{}+{}", bytes(s.arena_own), bytes(s.arena_peer)),
            ]
        })
        .collect();
    let mut widths = head.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let _ = write!(l, "{c:<w$}");
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(&head));
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&cells));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages_read_at_a_glance() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
        assert_eq!(age(250), "250ms");
        assert_eq!(age(192_000), "3m12s");
    }
}

//! The figures of a chaos run, as markdown and JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::procs::{Clients, Lang};

/// What a chaos run counted.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Summary {
    /// Seed of the random choices (rerun with `--seed`).
    pub(crate) seed: u64,
    /// Client processes at any time.
    pub(crate) clients: u32,
    /// Of them, PHP clients (through the extension).
    pub(crate) php_clients: u32,
    /// Length of the kill phase.
    pub(crate) seconds: f64,
    /// Calls started.
    pub(crate) calls_made: u64,
    /// Calls answered with the right reply.
    pub(crate) calls_completed: u64,
    /// Of them, by PHP clients.
    pub(crate) php_calls_completed: u64,
    /// Calls that failed with an error, by kind.
    pub(crate) calls_failed: BTreeMap<String, u64>,
    /// One-way messages sent.
    pub(crate) one_way: u64,
    /// Sessions opened by the clients.
    pub(crate) sessions: u64,
    /// Connects refused or failed while the server was down.
    pub(crate) connect_failures: u64,
    /// Client processes killed with SIGKILL.
    pub(crate) client_kills: u64,
    /// Of them, PHP clients.
    pub(crate) php_client_kills: u64,
    /// Server processes killed with SIGKILL and restarted.
    pub(crate) server_restarts: u64,
    /// Per restart: ms from the new server's readiness to the first
    /// successful call of a client that held a session with the old one.
    pub(crate) recoveries_ms: Vec<f64>,
    /// Must be 0: calls stuck past their timeout (+1 s), or clients silent
    /// for their timeout + 3 s.
    pub(crate) hung: u64,
    /// Must be 0: replies to another call, or damaged.
    pub(crate) wrong_replies: u64,
    /// The first wrong reply, described.
    pub(crate) first_wrong: Option<String>,
    /// Must be 0: session segments the server still held (open or mapped)
    /// after every client was gone, beyond its prepared ones.
    pub(crate) leaked_segments: usize,
    /// Must be 0: socket files left after the server's graceful stop.
    pub(crate) socket_files_left: usize,
    /// Must be 0: new files under `/dev/shm`.
    pub(crate) dev_shm_new: usize,
    /// Must be 0: session memfds held by this process at the end.
    pub(crate) own_segments: usize,
}

impl Summary {
    /// Adds up the clients' counters.
    pub(crate) fn add_clients(&mut self, clients: &Clients) {
        for (lang, c) in clients.counters() {
            self.calls_made += c.made;
            self.calls_completed += c.completed;
            if lang == Lang::Php {
                self.php_calls_completed += c.completed;
            }
            for (k, n) in c.failed {
                *self.calls_failed.entry(k).or_default() += n;
            }
            self.one_way += c.one_way;
            self.sessions += c.sessions;
            self.connect_failures += c.connect_failures;
            self.hung += c.hung;
            self.wrong_replies += c.wrong;
            if self.first_wrong.is_none() {
                self.first_wrong = c.first_wrong;
            }
        }
    }

    /// The must-be-zero figures that are not.
    pub(crate) fn must_be_zero(&self) -> Vec<String> {
        [
            ("hung calls", self.hung),
            ("wrong replies", self.wrong_replies),
            ("leaked segments", self.leaked_segments as u64),
            ("socket files left", self.socket_files_left as u64),
            ("new /dev/shm files", self.dev_shm_new as u64),
            (
                "segments held by the chaos process",
                self.own_segments as u64,
            ),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{n} {what}"))
        .collect()
    }

    fn failed_total(&self) -> u64 {
        self.calls_failed.values().sum()
    }
}

fn quantile(v: &[f64], q: f64) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((s.len() as f64 - 1.0) * q).round() as usize;
    s.get(i).copied()
}

/// The summary as a markdown table.
pub(crate) fn markdown(s: &Summary) -> String {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1} ms"));
    let failed: Vec<String> = s
        .calls_failed
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let rows = [
        (
            "duration",
            format!(
                "{:.0} s, {} client processes ({} PHP), seed {}",
                s.seconds, s.clients, s.php_clients, s.seed
            ),
        ),
        ("calls made", s.calls_made.to_string()),
        (
            "calls completed (reply checked)",
            format!(
                "{} ({} by PHP clients)",
                s.calls_completed, s.php_calls_completed
            ),
        ),
        (
            "calls failed with a clear error",
            format!("{} ({})", s.failed_total(), failed.join(", ")),
        ),
        ("one-way messages", s.one_way.to_string()),
        ("sessions opened", s.sessions.to_string()),
        (
            "client SIGKILLs",
            format!("{} ({} of PHP clients)", s.client_kills, s.php_client_kills),
        ),
        ("server SIGKILLs + restarts", s.server_restarts.to_string()),
        (
            "recovery after restart, p50",
            ms(quantile(&s.recoveries_ms, 0.5)),
        ),
        (
            "recovery after restart, max",
            ms(quantile(&s.recoveries_ms, 1.0)),
        ),
        ("**hung calls** (must be 0)", s.hung.to_string()),
        ("**wrong replies** (must be 0)", s.wrong_replies.to_string()),
        (
            "**leaked session segments** (must be 0)",
            s.leaked_segments.to_string(),
        ),
        (
            "**socket files left** (must be 0)",
            s.socket_files_left.to_string(),
        ),
        (
            "**new /dev/shm files** (must be 0)",
            s.dev_shm_new.to_string(),
        ),
    ];
    let mut out = String::from("# shmlink chaos\n\n| figure | value |\n|---|---|\n");
    for (k, v) in rows {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    if let Some(w) = &s.first_wrong {
        let _ = writeln!(out, "\nfirst wrong reply: {w}");
    }
    out
}

//! `--log-format json`: the pool's log lines (its own, the library's, and
//! its workers' output) as one JSON object per line, as log shippers
//! expect: `time` (RFC 3339, UTC, milliseconds), `level`, `event`, the
//! `worker_pid` and `reason` when the line has them, and the `message`
//! itself. The pool writes its lines as text; this room reads their few
//! fixed shapes (worker started, ready, exited, recycled, killed; reload;
//! a worker's output) and names them, so the text format stays as it is.

use std::str::FromStr;
use std::time::SystemTime;

use serde::Serialize;
use shmlink::Log;

/// How the pool writes its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One line of text per event (the default).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("{other:?} is not a log format (text or json)")),
        }
    }
}

impl LogFormat {
    /// A log that writes lines in this format to standard error.
    pub fn stderr(self) -> Log {
        match self {
            LogFormat::Text => Log::stderr(),
            LogFormat::Json => Log::to(|line| eprintln!("{}", json_line(line, SystemTime::now()))),
        }
    }
}

/// One log line as JSON.
#[derive(Debug, Serialize)]
struct Entry<'a> {
    time: String,
    level: &'static str,
    event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    message: &'a str,
}

/// `line`, written at `at`, as one JSON object.
pub fn json_line(line: &str, at: SystemTime) -> String {
    let time = humantime::format_rfc3339_millis(at).to_string();
    let mut e = Entry {
        time,
        level: "info",
        event: "message",
        worker_pid: None,
        stream: None,
        reason: None,
        message: line,
    };
    if let Some(rest) = line.strip_prefix("[worker ") {
        // "[worker PID STREAM] text": a worker's own output.
        if let Some((head, text)) = rest.split_once("] ") {
            let mut words = head.split(' ');
            e.worker_pid = words.next().and_then(|p| p.parse().ok());
            e.stream = words.next();
            e.event = "worker_output";
            e.message = text;
        }
        return encode(&e, line);
    }
    let text = line.strip_prefix("shmlink pool: ").unwrap_or(line);
    e.message = text;
    if let Some(rest) = text.strip_prefix("worker ") {
        e.worker_pid = rest.split(' ').next().and_then(|p| p.parse().ok());
    }
    let (event, level, reason) = classify(text);
    e.event = event;
    e.level = level;
    e.reason = reason;
    encode(&e, line)
}

/// The event, level and reason of a line of the pool's own.
fn classify(text: &str) -> (&'static str, &'static str, Option<&str>) {
    let worker = text.starts_with("worker ");
    if worker && text.contains(" started (place ") {
        ("worker_started", "info", None)
    } else if worker && text.ends_with(" ready") {
        ("worker_ready", "info", None)
    } else if worker && text.contains(" exited (") {
        let reason = text.split_once(" calls: ").map(|(_, r)| r);
        let bad = reason.is_none_or(|r| {
            r == "unexpectedly" || r.starts_with("died") || r.starts_with("killed")
        });
        ("worker_exited", if bad { "warn" } else { "info" }, reason)
    } else if worker && text.contains("--max-memory-hard") {
        ("worker_killed", "warn", Some("max_memory_hard"))
    } else if worker && text.contains("--max-memory") {
        ("worker_recycled", "info", Some("max_memory"))
    } else if worker && text.contains("--idle-ttl") {
        ("worker_recycled", "info", Some("idle_ttl"))
    } else if worker && text.contains("--ttl") {
        ("worker_recycled", "info", Some("ttl"))
    } else if worker && text.ends_with("killed") {
        ("worker_killed", "warn", None)
    } else if text.starts_with("reload: ") {
        ("reload", "info", None)
    } else if text.starts_with("cannot start ") || text.contains("failed start(s) in a row") {
        ("start_failed", "error", None)
    } else if text.starts_with("ready, listening on ") {
        ("ready", "info", None)
    } else if text.starts_with("listening on ") {
        ("listening", "info", None)
    } else if text == "stopped" {
        ("stopped", "info", None)
    } else {
        ("message", "info", None)
    }
}

fn encode(e: &Entry<'_>, line: &str) -> String {
    serde_json::to_string(e).unwrap_or_else(|_| {
        // Strings always serialize; kept total all the same.
        format!("{{\"message\":{:?}}}", line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> serde_json::Value {
        let text = json_line(line, SystemTime::UNIX_EPOCH);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_pools_lines_become_events() {
        let v = parsed("shmlink pool: worker 4242 started (place 1)");
        assert_eq!(v["event"], "worker_started");
        assert_eq!(v["worker_pid"], 4242);
        assert_eq!(v["time"], "1970-01-01T00:00:00.000Z");
        let v = parsed("shmlink pool: worker 7 exited (exit status: 0) after 5000 calls: recycled after 5000 calls (--max-jobs)");
        assert_eq!(
            (
                v["event"].as_str(),
                v["level"].as_str(),
                v["reason"].as_str()
            ),
            (
                Some("worker_exited"),
                Some("info"),
                Some("recycled after 5000 calls (--max-jobs)")
            )
        );
        let v = parsed(
            "shmlink pool: worker 7 exited (signal: 9 (SIGKILL)) after 3 calls: died during a call",
        );
        assert_eq!(v["level"], "warn");
        let v = parsed("shmlink pool: worker 9 is older than --ttl 1s: recycled");
        assert_eq!(
            (v["event"].as_str(), v["reason"].as_str()),
            (Some("worker_recycled"), Some("ttl"))
        );
        let v = parsed("shmlink pool: reload: starting generation 2");
        assert_eq!(v["event"], "reload");
        assert!(v.get("worker_pid").is_none());
    }

    #[test]
    fn a_workers_output_keeps_its_text() {
        let v = parsed("[worker 12 stderr] PHP Warning: \"quoted\" \u{1}");
        assert_eq!(v["event"], "worker_output");
        assert_eq!(v["worker_pid"], 12);
        assert_eq!(v["stream"], "stderr");
        assert_eq!(v["message"], "PHP Warning: \"quoted\" \u{1}");
    }

    #[test]
    fn anything_else_is_a_message() {
        let v = parsed("session 3 of pid 99 ended: protocol error");
        assert_eq!(
            (v["event"].as_str(), v["level"].as_str()),
            (Some("message"), Some("info"))
        );
        assert_eq!(v["message"], "session 3 of pid 99 ended: protocol error");
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert!("xml".parse::<LogFormat>().is_err());
    }
}

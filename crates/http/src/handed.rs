//! What a pool hands down to a worker that serves HTTP itself: descriptors
//! at fixed numbers (its listening sockets, the counters page, the access
//! log) and the limits, named in one environment variable,
//! [`HTTP_ENV`] (docs/protocol.md, "Workers that serve HTTP"):
//!
//! ```text
//! SHMLINK_HTTP=listen=3,4 counters=5:1 access=6 max_body=8388608 max_header=65536 header_timeout_ms=10000 max_connections=10000 queue_timeout_ms=10000
//! ```
//!
//! Space-separated `key=value` pairs, each key once; `counters`,
//! `access`, `root` and `sendfile` (directories, percent-encoded, the
//! latter separated by commas) may be absent. A key this version does not know is refused, so
//! a worker never runs with a limit it did not understand.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use percent_encoding::{percent_decode_str, percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::HttpError;
use crate::options::{FrontOptions, DEFAULT_SEND_TIMEOUT};

/// The environment variable a pool sets for workers that serve HTTP.
pub const HTTP_ENV: &str = "SHMLINK_HTTP";

/// What a pool hands down to a worker that serves HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handed {
    /// Descriptors of the listening TCP sockets (shared by every worker).
    pub listeners: Vec<RawFd>,
    /// The counters page's descriptor and this worker's slot in it.
    pub counters: Option<(RawFd, usize)>,
    /// A descriptor opened for appending access-log lines.
    pub access_log: Option<RawFd>,
    /// Largest request body (413 past it).
    pub max_body: usize,
    /// Largest request head (431 past it).
    pub max_header_bytes: usize,
    /// Time for a request's head, and an idle keep-alive connection's life.
    pub header_timeout: Duration,
    /// How long a client may take nothing of a response being written
    /// (optional in [`HTTP_ENV`]: absent, 60 s; sent only when it differs,
    /// so a worker built before it still starts under the default).
    pub send_timeout: Duration,
    /// Connections the workers keep open at once, all together (each
    /// counts every slot of the counters page).
    pub max_connections: usize,
    /// How long a request may wait in the worker for its turn (503 past it).
    pub queue_timeout: Duration,
    /// `--http-root`.
    pub root: Option<PathBuf>,
    /// `--http-sendfile`.
    pub sendfile: Vec<PathBuf>,
    /// `--http-spool-over` (`usize::MAX`: none).
    pub spool_over: usize,
    /// `--http-spool-dir`.
    pub spool_dir: Option<PathBuf>,
}

/// The bytes of a path that travel as they are in [`HTTP_ENV`]; the
/// others (spaces, commas, `%`, ...) are percent-encoded.
const PATH_BYTES: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'.')
    .remove(b'-')
    .remove(b'_');

fn encode_path(p: &Path) -> String {
    percent_encode(p.as_os_str().as_bytes(), PATH_BYTES).to_string()
}

fn decode_path(v: &str) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(
        &percent_decode_str(v).collect::<Vec<u8>>(),
    ))
}

impl Handed {
    /// The limits of `opts`, with no descriptor yet.
    pub fn limits(opts: &FrontOptions, queue_timeout: Duration) -> Handed {
        Handed {
            listeners: Vec::new(),
            counters: None,
            access_log: None,
            max_body: opts.max_body,
            max_header_bytes: opts.max_header_bytes,
            header_timeout: opts.header_timeout,
            send_timeout: opts.send_timeout,
            max_connections: opts.max_connections,
            queue_timeout,
            root: opts.root.clone(),
            sendfile: opts.sendfile.clone(),
            spool_over: opts.spool_over,
            spool_dir: opts.spool_dir.clone(),
        }
    }

    /// The value of [`HTTP_ENV`].
    pub fn encode(&self) -> String {
        let list = |fds: &[RawFd]| {
            fds.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut out = format!("listen={}", list(&self.listeners));
        if let Some((fd, slot)) = self.counters {
            out.push_str(&format!(" counters={fd}:{slot}"));
        }
        if let Some(fd) = self.access_log {
            out.push_str(&format!(" access={fd}"));
        }
        out.push_str(&format!(
            " max_body={} max_header={} header_timeout_ms={} max_connections={} queue_timeout_ms={}",
            self.max_body,
            self.max_header_bytes,
            self.header_timeout.as_millis(),
            self.max_connections,
            self.queue_timeout.as_millis()
        ));
        if self.send_timeout != DEFAULT_SEND_TIMEOUT {
            out.push_str(&format!(
                " send_timeout_ms={}",
                self.send_timeout.as_millis()
            ));
        }
        if let Some(root) = &self.root {
            out.push_str(&format!(" root={}", encode_path(root)));
        }
        if !self.sendfile.is_empty() {
            let dirs: Vec<String> = self.sendfile.iter().map(|p| encode_path(p)).collect();
            out.push_str(&format!(" sendfile={}", dirs.join(",")));
        }
        if self.spool_over != usize::MAX {
            out.push_str(&format!(" spool_over={}", self.spool_over));
        }
        if let Some(dir) = &self.spool_dir {
            out.push_str(&format!(" spool_dir={}", encode_path(dir)));
        }
        out
    }

    /// Reads a value of [`HTTP_ENV`].
    ///
    /// # Errors
    /// [`HttpError::Options`] naming the variable, the key and the value:
    /// a pair without `=`, a key unknown or given twice, a number that does
    /// not parse, a required key missing, a limit out of range.
    pub fn decode(value: &str) -> Result<Handed, HttpError> {
        let bad = |why: String| HttpError::Options(format!("{HTTP_ENV}={value:?}: {why}"));
        let mut seen: Vec<&str> = Vec::new();
        let mut h = Handed {
            listeners: Vec::new(),
            counters: None,
            access_log: None,
            max_body: 0,
            max_header_bytes: 0,
            header_timeout: Duration::ZERO,
            send_timeout: DEFAULT_SEND_TIMEOUT,
            max_connections: 0,
            queue_timeout: Duration::ZERO,
            root: None,
            sendfile: Vec::new(),
            spool_over: usize::MAX,
            spool_dir: None,
        };
        let number = |key: &str, v: &str| {
            v.parse::<u64>()
                .map_err(|_| bad(format!("{key}={v:?} is not a number")))
        };
        let fd = |key: &str, v: &str| {
            v.parse::<RawFd>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| bad(format!("{key}={v:?} is not a descriptor number")))
        };
        let size = |key: &str, v: &str| {
            number(key, v).and_then(|n| {
                usize::try_from(n).map_err(|_| bad(format!("{key}={n} is too large")))
            })
        };
        for pair in value.split_ascii_whitespace() {
            let (key, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("{pair:?} is not key=value")))?;
            if seen.contains(&key) {
                return Err(bad(format!("{key} is given twice")));
            }
            seen.push(key);
            match key {
                "listen" => {
                    for n in v.split(',') {
                        h.listeners.push(fd(key, n)?);
                    }
                }
                "counters" => {
                    let (f, slot) = v
                        .split_once(':')
                        .ok_or_else(|| bad(format!("counters={v:?} is not FD:SLOT")))?;
                    h.counters = Some((fd(key, f)?, size(key, slot)?));
                }
                "access" => h.access_log = Some(fd(key, v)?),
                "max_body" => h.max_body = size(key, v)?,
                "max_header" => h.max_header_bytes = size(key, v)?,
                "header_timeout_ms" => h.header_timeout = Duration::from_millis(number(key, v)?),
                "send_timeout_ms" => h.send_timeout = Duration::from_millis(number(key, v)?),
                "max_connections" => h.max_connections = size(key, v)?,
                "queue_timeout_ms" => h.queue_timeout = Duration::from_millis(number(key, v)?),
                "root" => h.root = Some(decode_path(v)),
                "sendfile" => h.sendfile = v.split(',').map(decode_path).collect(),
                "spool_over" => h.spool_over = size(key, v)?,
                "spool_dir" => h.spool_dir = Some(decode_path(v)),
                other => return Err(bad(format!("{other} is not a key this worker knows"))),
            }
        }
        let required = [
            "listen",
            "max_body",
            "max_header",
            "header_timeout_ms",
            "max_connections",
            "queue_timeout_ms",
        ];
        if let Some(missing) = required.iter().find(|k| !seen.contains(k)) {
            return Err(bad(format!("{missing} is missing")));
        }
        // The directories are the worker's to open (and name when it
        // cannot): the limits are checked here.
        let opts = FrontOptions {
            root: None,
            sendfile: Vec::new(),
            spool_dir: None,
            ..h.front_options()
        };
        opts.validate().map_err(|e| bad(e.to_string()))?;
        if h.queue_timeout.is_zero() {
            return Err(bad("queue_timeout_ms must be greater than zero".into()));
        }
        Ok(h)
    }

    /// The limits as front options (no address: the sockets are handed).
    pub(crate) fn front_options(&self) -> FrontOptions {
        FrontOptions {
            listen: vec!["(handed down)".into()],
            max_body: self.max_body,
            max_header_bytes: self.max_header_bytes,
            header_timeout: self.header_timeout,
            send_timeout: self.send_timeout,
            max_connections: self.max_connections,
            threads: 1,
            access_log: None,
            root: self.root.clone(),
            sendfile: self.sendfile.clone(),
            spool_over: self.spool_over,
            spool_dir: self.spool_dir.clone(),
        }
    }
}

/// Whether this process has taken its handed-down descriptors already.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// Takes the descriptors `fds` handed down to this process, once per
/// process.
///
/// # Errors
/// A second take in the same process; a number that is not open.
pub(crate) fn take(fds: &[RawFd]) -> Result<Vec<OwnedFd>, HttpError> {
    if TAKEN.swap(true, Ordering::AcqRel) {
        return Err(HttpError::Options(format!(
            "the descriptors in {HTTP_ENV} were taken already by another HTTP server of this process \
             (one worker per process serves HTTP)"
        )));
    }
    let mut owned = Vec::with_capacity(fds.len());
    for (i, &fd) in fds.iter().enumerate() {
        if fds[..i].contains(&fd) {
            return Err(HttpError::Options(format!(
                "{HTTP_ENV} names descriptor {fd} twice"
            )));
        }
        // SAFETY: the pool handed `fd` down to this process for this server
        // alone (the variable's contract), the numbers are distinct
        // (checked above), and the process-wide flag above makes sure they
        // are taken once.
        let taken = unsafe { shmlink_sys::inherit::take(fd) }.map_err(|e| HttpError::Io {
            context: format!("taking descriptor {fd} named in {HTTP_ENV}"),
            source: e,
        })?;
        owned.push(taken);
    }
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Handed {
        Handed {
            listeners: vec![3, 4],
            counters: Some((5, 1)),
            access_log: Some(6),
            ..Handed::limits(
                &FrontOptions::new(vec!["x".into()]),
                Duration::from_secs(10),
            )
        }
    }

    #[test]
    fn it_round_trips() {
        let h = sample();
        assert_eq!(
            h.encode(),
            "listen=3,4 counters=5:1 access=6 max_body=8388608 max_header=65536 \
             header_timeout_ms=10000 max_connections=10000 queue_timeout_ms=10000 \
             spool_over=1048576"
        );
        assert_eq!(Handed::decode(&h.encode()).expect("decode"), h);
    }

    #[test]
    fn file_directories_travel_percent_encoded() {
        let h = Handed {
            root: Some(PathBuf::from("/srv/my app/public")),
            sendfile: vec![PathBuf::from("/a,b"), PathBuf::from("/c%d")],
            spool_over: usize::MAX,
            ..sample()
        };
        let v = h.encode();
        assert!(
            v.ends_with(" root=/srv/my%20app/public sendfile=/a%2Cb,/c%25d"),
            "{v}"
        );
        assert_eq!(Handed::decode(&v).expect("decode"), h);
    }

    #[test]
    fn bad_values_are_named() {
        let cases = [
            ("", "listen is missing"),
            ("listen=3 listen=4", "listen is given twice"),
            ("listen=x", "listen=\"x\" is not a descriptor number"),
            ("listen=-1", "is not a descriptor number"),
            ("listen=3 counters=5", "is not FD:SLOT"),
            (
                "listen=3 colour=blue",
                "colour is not a key this worker knows",
            ),
            ("listen=3 max_body", "\"max_body\" is not key=value"),
        ];
        for (value, expected) in cases {
            let e = Handed::decode(value).expect_err(value).to_string();
            assert!(e.contains(expected), "{value}: {e}");
            assert!(e.contains("SHMLINK_HTTP="), "{e}");
        }
        let mut h = sample();
        h.max_header_bytes = 100;
        let e = Handed::decode(&h.encode())
            .expect_err("small head")
            .to_string();
        assert!(e.contains("--http-max-header must be at least 8192"), "{e}");
    }
}

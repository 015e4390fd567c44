//! Options of the front.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::HttpError;

/// [`FrontOptions::send_timeout`]'s default, as nginx's `send_timeout`.
pub(crate) const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// Options of a [`Front`](crate::Front).
#[derive(Debug, Clone)]
pub struct FrontOptions {
    /// `HOST:PORT` addresses to listen on (port 0: any free port).
    pub listen: Vec<String>,
    /// Largest request body; a larger one is answered 413.
    pub max_body: usize,
    /// Largest request head (request line and headers); a larger one is
    /// answered 431.
    pub max_header_bytes: usize,
    /// Time a client has to send a request's head (also how long an idle
    /// keep-alive connection stays open); past it the connection is closed.
    pub header_timeout: Duration,
    /// How long a client may take nothing of a response being written (a
    /// body, a file the server sends, a streamed answer) before its
    /// connection is closed; the time starts again whenever it takes some.
    pub send_timeout: Duration,
    /// Most connections open at once; more are closed as soon as accepted.
    pub max_connections: usize,
    /// Threads of the front's runtime (0: one per CPU, at least 2). A
    /// request waiting for its worker holds another thread meanwhile (from
    /// the runtime's blocking pool), so a slow request holds up no other.
    pub threads: usize,
    /// Where to write one line per request (`-`: standard error).
    pub access_log: Option<PathBuf>,
    /// Serve the regular files under this directory to `GET` and `HEAD`
    /// requests from the server itself (PHP scripts, hidden files and
    /// directories go to the application, as do paths with no file).
    pub root: Option<PathBuf>,
    /// Directories under which an application may name a file in
    /// `X-Sendfile` (an absolute path) or `X-Accel-Redirect` (a path
    /// beneath the first) for the server to send. Empty: such headers pass
    /// to the client as any other.
    pub sendfile: Vec<PathBuf>,
    /// Request bodies larger than this are written to an unnamed file in
    /// `spool_dir` as they arrive and handed to the application as a file
    /// (`usize::MAX`: every body stays in memory).
    pub spool_over: usize,
    /// Where spooled bodies go (`None`: the system's temporary directory).
    pub spool_dir: Option<PathBuf>,
}

impl FrontOptions {
    /// Options listening on `listen` with the defaults: 8 MiB bodies, 64 KiB
    /// heads, 10 s for a head, 60 s for a client taking nothing of a
    /// response, 10,000 connections, one thread per CPU (at least 2), no
    /// access log.
    pub fn new(listen: Vec<String>) -> FrontOptions {
        FrontOptions {
            listen,
            max_body: 8 << 20,
            max_header_bytes: 64 << 10,
            header_timeout: Duration::from_secs(10),
            send_timeout: DEFAULT_SEND_TIMEOUT,
            max_connections: 10_000,
            threads: 0,
            access_log: None,
            root: None,
            sendfile: Vec::new(),
            spool_over: 1 << 20,
            spool_dir: None,
        }
    }

    /// The spool the engine writes large bodies to.
    pub(crate) fn spool(&self) -> Option<crate::engine::Spool> {
        (self.spool_over != usize::MAX).then(|| crate::engine::Spool {
            over: self.spool_over,
            dir: self.spool_dir.clone().unwrap_or_else(std::env::temp_dir),
        })
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`HttpError::Options`] naming the field.
    pub fn validate(&self) -> Result<(), HttpError> {
        let bad = |what: &str| Err(HttpError::Options(what.to_string()));
        if self.listen.is_empty() {
            return bad("at least one --http address is needed");
        }
        if self.max_header_bytes < 8192 {
            return bad("--http-max-header must be at least 8192 bytes");
        }
        if self.header_timeout.is_zero() {
            return bad("--http-header-timeout must be greater than zero");
        }
        if self.send_timeout.is_zero() {
            return bad("--http-send-timeout must be greater than zero");
        }
        if self.max_connections == 0 {
            return bad("--http-max-connections must be at least 1");
        }
        let dirs = self.root.iter().map(|d| ("--http-root", d));
        let dirs = dirs.chain(self.spool_dir.iter().map(|d| ("--http-spool-dir", d)));
        for (option, dir) in dirs.chain(self.sendfile.iter().map(|d| ("--http-sendfile", d))) {
            if !dir.is_dir() {
                return Err(HttpError::Options(format!(
                    "{option} {}: not a directory this process can reach",
                    dir.display()
                )));
            }
        }
        Ok(())
    }
}

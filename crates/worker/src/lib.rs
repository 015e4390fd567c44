//! A worker of `shmlink pool`: a process that answers the calls its
//! supervisor hands it ([`shmlink::Worker`]) and, when the pool hands its
//! HTTP listeners down ([`shmlink_http::HTTP_ENV`]), the HTTP requests it
//! accepts and parses itself ([`shmlink_http::WorkerHttp`]), on the same
//! thread, one at a time. An HTTP request comes as a call whose request is
//! its encoding ([`shmlink_http::wire::Request`], told apart by its magic)
//! and is answered with an encoded response, so a worker's loop serves both
//! alike.
//!
//! Its loop waits on its HTTP connections and on its session's socket at
//! once: when the supervisor says goodbye (recycling, reload, shutdown) the
//! worker stops accepting, answers the requests it holds, closes its
//! keep-alive connections between requests, and only then reports the
//! stop; when the supervisor dies, the same, then the error.
//!
//! # Examples
//! ```no_run
//! let mut w = shmlink_worker::PoolWorker::from_env(Default::default())?;
//! while let Some(request) = w.accept()? {
//!     let answer = request.to_vec();
//!     w.respond(&answer)?;
//! }
//! # Ok::<(), shmlink::Error>(())
//! ```

use shmlink::{ClientOptions, Error, Polled, Result, Worker};
use shmlink_http::wire::Response;
use shmlink_http::{Event, HttpError, WorkerHttp};

/// Where the call accepted last came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    Supervisor,
    Http,
    /// An HTTP request whose streamed answer is over (ended, or its client
    /// gone): answering it again does nothing.
    HttpOver,
}

/// A worker of `shmlink pool`. Not thread-safe by design (`&mut self`).
#[derive(Debug)]
pub struct PoolWorker {
    worker: Worker,
    http: Option<WorkerHttp>,
    /// The call accepted last and not answered.
    pending: Option<From>,
    /// The supervisor's error, reported once the HTTP connections are done.
    ended: Option<Error>,
    /// A streamed answer to a call that cannot stream (from the pool's
    /// front, or a plain call): gathered whole, sent at its end.
    gathered: Option<Response>,
}

impl PoolWorker {
    /// Connects to the supervisor whose address is in `SHMLINK_WORKER`, and
    /// serves HTTP when the pool asked for it in `SHMLINK_HTTP`.
    ///
    /// # Errors
    /// As [`Worker::from_env`]; a `SHMLINK_HTTP` that does not decode or
    /// names descriptors that are not what it says.
    pub fn from_env(options: ClientOptions) -> Result<PoolWorker> {
        Self::with(Worker::from_env(options)?)
    }

    /// Connects to the supervisor at `address`, and serves HTTP when the
    /// pool asked for it in `SHMLINK_HTTP`.
    ///
    /// # Errors
    /// As [`PoolWorker::from_env`].
    pub fn connect(address: &str, options: ClientOptions) -> Result<PoolWorker> {
        Self::with(Worker::connect(address, options)?)
    }

    fn with(worker: Worker) -> Result<PoolWorker> {
        let log = Box::new(|line: &str| eprintln!("shmlink worker: {line}"));
        let mut http = WorkerHttp::from_env(log).map_err(http_error)?;
        if let Some(h) = http.as_mut() {
            h.watch(worker.supervisor_socket()?).map_err(http_error)?;
        }
        Ok(PoolWorker {
            worker,
            http,
            pending: None,
            ended: None,
            gathered: None,
        })
    }

    /// Whether this worker serves HTTP itself.
    pub fn serves_http(&self) -> bool {
        self.http.is_some()
    }

    /// Waits for the next call or HTTP request and returns its request (an
    /// HTTP one encoded); `None` when the supervisor told this worker to
    /// stop and, when it serves HTTP, every connection is closed. A call
    /// accepted earlier and not answered is answered first (an error; a
    /// 500 for HTTP).
    ///
    /// # Errors
    /// The supervisor died or broke the protocol (reported once the HTTP
    /// connections are done).
    pub fn accept(&mut self) -> Result<Option<&[u8]>> {
        if self.pending == Some(From::Http) {
            if let Some(h) = self.http.as_mut() {
                h.fail("the worker took its next request without answering this one");
            }
        }
        self.pending = None;
        let Some(http) = self.http.as_mut() else {
            let request = self.worker.accept()?;
            self.pending = request.is_some().then_some(From::Supervisor);
            return Ok(request);
        };
        loop {
            match http.serve() {
                Event::Request => {
                    self.pending = Some(From::Http);
                    return Ok(self.http.as_ref().and_then(WorkerHttp::request));
                }
                Event::Done => return self.ended.take().map_or(Ok(None), Err),
                Event::Watched => match self.worker.try_accept() {
                    Ok(Polled::Call(_)) => {
                        self.pending = Some(From::Supervisor);
                        return Ok(self.worker.request());
                    }
                    Ok(Polled::Nothing) => {}
                    Ok(Polled::Stop) => http.drain(),
                    Err(e) => {
                        self.ended = Some(e);
                        http.drain();
                    }
                },
            }
        }
    }

    /// Answers the call accepted last with `response` (an encoded HTTP
    /// response for an HTTP request).
    ///
    /// # Errors
    /// Nothing accepted to answer; the supervisor gone or no room for the
    /// answer within the timeout (calls from the supervisor).
    pub fn respond(&mut self, response: &[u8]) -> Result<()> {
        self.gathered = None;
        match (self.pending.take(), self.http.as_mut()) {
            (Some(From::HttpOver), _) => Ok(()),
            (Some(From::Http), Some(h)) => h.respond(response).map_err(http_error),
            _ => self.worker.respond(response),
        }
    }

    /// Answers the call accepted last with an error: the caller receives a
    /// remote error with `code` and `message`; an HTTP client gets a 500
    /// (the message goes to the log).
    ///
    /// # Errors
    /// As [`PoolWorker::respond`].
    pub fn fail(&mut self, code: u32, message: &str) -> Result<()> {
        self.gathered = None;
        match (self.pending.take(), self.http.as_mut()) {
            (Some(From::HttpOver), _) => Ok(()),
            (Some(From::Http), Some(h)) => {
                h.fail(&format!("the worker failed with code {code:#x}: {message}"));
                Ok(())
            }
            _ => self.worker.fail(code, message),
        }
    }

    /// Starts streaming the answer to the HTTP request accepted last: the
    /// encoded response's status and headers go out now, its body as the
    /// first piece ([`WorkerHttp::stream_begin`]); more with
    /// [`PoolWorker::stream_write`], the end with [`PoolWorker::stream_end`].
    /// A request relayed by the pool's front (`--http-mode front`) cannot
    /// stream: its pieces are gathered and answered whole at the end.
    ///
    /// # Errors
    /// Nothing accepted to answer; the HTTP client gone or not reading
    /// ([`Error::Io`] naming it: the request is over); an answer that does
    /// not decode (gathered).
    pub fn stream_begin(&mut self, response: &[u8]) -> Result<()> {
        match (self.pending, self.http.as_mut()) {
            (Some(From::Http), Some(h)) => h.stream_begin(response).map_err(|e| {
                if !h.is_streaming() {
                    self.pending = Some(From::HttpOver);
                }
                http_error(e)
            }),
            (None | Some(From::HttpOver), _) => Err(Error::InvalidOption {
                name: "stream",
                reason: "no call is waiting for an answer".into(),
            }),
            _ => {
                let r = Response::decode(response).map_err(|e| Error::InvalidOption {
                    name: "stream",
                    reason: format!("the streamed answer's head does not decode: {e}"),
                })?;
                self.gathered = Some(r);
                Ok(())
            }
        }
    }

    /// Writes the next piece of the answer being streamed.
    ///
    /// # Errors
    /// As [`PoolWorker::stream_begin`].
    pub fn stream_write(&mut self, data: &[u8]) -> Result<()> {
        if let Some(g) = self.gathered.as_mut() {
            g.body.extend_from_slice(data);
            return Ok(());
        }
        let h = self.streaming_http()?;
        let r = h.stream_write(data);
        if r.is_err() && !h.is_streaming() {
            self.pending = Some(From::HttpOver);
        }
        r.map_err(http_error)
    }

    /// Ends the answer being streamed.
    ///
    /// # Errors
    /// As [`PoolWorker::stream_begin`].
    pub fn stream_end(&mut self) -> Result<()> {
        if let Some(g) = self.gathered.take() {
            let mut out = Vec::new();
            g.encode_into(&mut out);
            return self.respond(&out);
        }
        self.streaming_http()?;
        self.pending = Some(From::HttpOver);
        self.streaming_http()?.stream_end().map_err(http_error)
    }

    /// Whether an answer is being streamed.
    pub fn is_streaming(&self) -> bool {
        self.gathered.is_some() || self.http.as_ref().is_some_and(WorkerHttp::is_streaming)
    }

    fn streaming_http(&mut self) -> Result<&mut WorkerHttp> {
        self.http
            .as_mut()
            .filter(|h| h.is_streaming())
            .ok_or_else(|| Error::InvalidOption {
                name: "stream",
                reason: "no answer is being streamed".into(),
            })
    }

    /// Answers calls with `handler` until the supervisor tells this worker
    /// to stop; a handler's error reaches the caller as a remote error (an
    /// HTTP client: a 500).
    ///
    /// # Errors
    /// As [`PoolWorker::accept`] and [`PoolWorker::respond`].
    pub fn run<F>(&mut self, mut handler: F) -> Result<()>
    where
        F: FnMut(&[u8], &mut Vec<u8>) -> std::result::Result<(), shmlink::RemoteError>,
    {
        let mut response = Vec::new();
        loop {
            let Some(request) = self.accept()? else {
                return Ok(());
            };
            response.clear();
            match handler(request, &mut response) {
                Ok(()) => self.respond(&response)?,
                Err(e) => self.fail(e.code, &e.message)?,
            }
        }
    }
}

fn http_error(e: HttpError) -> Error {
    match e {
        HttpError::Io { context, source } => Error::Io { context, source },
        HttpError::ClientGone(why) => Error::Io {
            context: why,
            source: std::io::Error::from(std::io::ErrorKind::BrokenPipe),
        },
        other => Error::InvalidOption {
            name: "SHMLINK_HTTP",
            reason: other.to_string(),
        },
    }
}

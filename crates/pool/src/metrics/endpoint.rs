//! The `--metrics` listener: a thread answering `GET /metrics` with the
//! pool's metrics, one connection at a time (scrapes are rare and small),
//! each with a read deadline so that a silent client cannot hold it.
//! Anything else gets 404 (another path), 405 (another method) or 400.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use shmlink_sys::eventfd::EventFd;

use crate::error::PoolError;

/// How long a scraper may take to send its request.
const READ_DEADLINE: Duration = Duration::from_secs(2);
/// Largest request head read.
const MAX_HEAD: usize = 8 << 10;
/// What the endpoint answers with.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Makes the text of a scrape.
pub(crate) type Render = Box<dyn Fn() -> prometheus::Result<String> + Send>;

/// The running listener; stopped when dropped.
#[derive(Debug)]
pub(crate) struct Endpoint {
    addr: SocketAddr,
    listener: TcpListener,
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Binds `addr` (HOST:PORT; port 0 picks one) and serves.
    ///
    /// # Errors
    /// The address cannot be bound, or the thread not started.
    pub(crate) fn start(addr: &str, render: Render) -> Result<Endpoint, PoolError> {
        let listener = TcpListener::bind(addr).map_err(|e| PoolError::Io {
            context: format!("binding the metrics endpoint {addr}"),
            source: e,
        })?;
        Self::start_on(listener, render)
    }

    /// Serves on `listener`, already bound (a predecessor's, at an
    /// upgrade). The socket is made non-blocking: a predecessor and its
    /// successor may accept on it at once, and the one that loses the race
    /// must not block in `accept`.
    ///
    /// # Errors
    /// The socket's address or mode, or the thread not started.
    pub(crate) fn start_on(listener: TcpListener, render: Render) -> Result<Endpoint, PoolError> {
        let io = |context: &str| {
            let context = context.to_string();
            move |source| PoolError::Io { context, source }
        };
        let bound = listener
            .local_addr()
            .map_err(io("reading the metrics endpoint's address"))?;
        listener
            .set_nonblocking(true)
            .map_err(io("making the metrics listener non-blocking"))?;
        let stop = Arc::new(EventFd::new().map_err(io("making the metrics endpoint's waker"))?);
        let (stopping, mine) = (
            Arc::clone(&stop),
            listener
                .try_clone()
                .map_err(io("sharing the metrics listener"))?,
        );
        let thread = std::thread::Builder::new()
            .name("shmlink-pool-metrics".into())
            .spawn(move || serve(&mine, &stopping, &render))
            .map_err(io("starting the metrics thread"))?;
        Ok(Endpoint {
            addr: bound,
            listener,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its listening socket (to hand down at an upgrade).
    pub(crate) fn listener(&self) -> &TcpListener {
        &self.listener
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers connections until `stop` rings.
fn serve(listener: &TcpListener, stop: &EventFd, render: &Render) {
    loop {
        match shmlink_sys::poll::either_readable(stop, listener, None) {
            Ok(Some(1)) => {}
            _ => return,
        }
        // Another process sharing the listener may have taken it: EAGAIN.
        let Ok((fd, _)) = shmlink_sys::net::accept_tcp(listener) else {
            continue;
        };
        let c = TcpStream::from(fd);
        if c.set_nonblocking(false).is_ok() {
            let _ = answer(c, render);
        }
    }
}

/// Reads one request head and answers it.
fn answer(mut c: TcpStream, render: &Render) -> std::io::Result<()> {
    c.set_read_timeout(Some(READ_DEADLINE))?;
    c.set_write_timeout(Some(READ_DEADLINE))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let (method, path) = loop {
        let n = c.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {
                break (
                    req.method.unwrap_or("").to_string(),
                    req.path.unwrap_or("").to_string(),
                )
            }
            Ok(httparse::Status::Partial) if head.len() < MAX_HEAD => {}
            _ => return reply(&mut c, "400 Bad Request", "text/plain", "bad request\n"),
        }
    };
    let path = path.split('?').next().unwrap_or("");
    match (method.as_str(), path) {
        ("GET" | "HEAD", "/metrics") => match render() {
            Ok(text) if method == "GET" => reply(&mut c, "200 OK", CONTENT_TYPE, &text),
            Ok(_) => reply(&mut c, "200 OK", CONTENT_TYPE, ""),
            Err(_) => reply(
                &mut c,
                "500 Internal Server Error",
                "text/plain",
                "cannot encode the metrics\n",
            ),
        },
        (_, "/metrics") => reply(
            &mut c,
            "405 Method Not Allowed",
            "text/plain",
            "only GET /metrics\n",
        ),
        _ => reply(
            &mut c,
            "404 Not Found",
            "text/plain",
            "the metrics are at /metrics\n",
        ),
    }
}

fn reply(c: &mut TcpStream, status: &str, kind: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())
}

//! One request's path, the same wherever the application runs (behind the
//! pool's front, or in the worker that accepted the connection): the limits
//! checked, the body read, the request encoded ([`wire`]), handed to a
//! [`Route`], its answer turned into the response; counted and logged.

use std::future::Future;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_LENGTH};
use hyper::{Request, Response};

use crate::access::AccessLog;
use crate::backend::Fault;
use crate::counters::Counters;
use crate::options::FrontOptions;
use crate::respond;
use crate::wire;

/// A response, or the fault that stands for it.
pub(crate) type Answer = Result<Response<Full<Bytes>>, Fault>;

/// Where an encoded request goes to be answered.
pub(crate) trait Route: Send + Sync + 'static {
    /// The response to the encoded request (made of the application's
    /// encoded answer by [`respond::from_worker`]), or the fault that
    /// stands for it.
    fn call(&self, request: Vec<u8>, conn: &Conn) -> impl Future<Output = Answer> + Send;
}

/// The connection a request came on.
#[derive(Debug)]
pub(crate) struct Conn {
    /// The client's address, `IP:PORT`.
    pub(crate) remote: String,
    /// The connection's socket (for a worker's last word on a timeout).
    pub(crate) fd: RawFd,
}

/// What every connection of a server shares.
pub(crate) struct Shared<R> {
    pub(crate) route: R,
    pub(crate) opts: FrontOptions,
    pub(crate) counters: std::sync::Arc<Counters>,
    pub(crate) access: Option<AccessLog>,
    /// Reasons of faults go here (the pool's log, a worker's stderr).
    pub(crate) log: Box<dyn Fn(&str) + Send + Sync>,
    /// Stopping: every response closes its connection.
    pub(crate) draining: AtomicBool,
}

/// Answers one request, counting and logging it.
pub(crate) async fn answer<R: Route>(
    shared: &Shared<R>,
    conn: &Conn,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let started = Instant::now();
    let line = shared
        .access
        .as_ref()
        .map(|_| format!("{} {} {:?}", req.method(), req.uri(), req.version()));
    let (status, body_in, mut resp) = respond_to(shared, conn, req).await;
    if shared.draining.load(Ordering::Relaxed) {
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    let body_out = hyper::body::Body::size_hint(resp.body())
        .exact()
        .unwrap_or(0) as usize;
    shared.counters.answered(status, body_in, body_out);
    if let (Some(log), Some(line)) = (&shared.access, line) {
        log.line(&conn.remote, &line, status, body_out, started.elapsed());
    }
    resp
}

/// The status, the request body's size and the response.
async fn respond_to<R: Route>(
    shared: &Shared<R>,
    conn: &Conn,
    req: Request<Incoming>,
) -> (u16, usize, Response<Full<Bytes>>) {
    // CONNECT asks a proxy for a tunnel: nothing a worker answers.
    if req.method() == hyper::Method::CONNECT {
        return (405, 0, respond::plain(405, true));
    }
    let max = shared.opts.max_body;
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return (413, 0, respond::plain(413, true));
    }
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return (413, 0, respond::plain(413, true))
        }
        // A broken chunked body, or the client gone mid-body.
        Err(_) => return (400, 0, respond::plain(400, true)),
    };
    let mut encoded = Vec::with_capacity(256 + body.len());
    wire::encode_request(
        &mut encoded,
        parts.method.as_str(),
        parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |pq| pq.as_str()),
        version(parts.version),
        &conn.remote,
        parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes())),
        &body,
    );
    let f = match shared.route.call(encoded, conn).await {
        Ok(resp) => return (resp.status().as_u16(), body.len(), resp),
        Err(f) => f,
    };
    (shared.log)(&format!(
        "HTTP {} {} from {}: {} ({})",
        parts.method, parts.uri, conn.remote, f.status, f.reason
    ));
    (f.status, body.len(), respond::plain(f.status, false))
}

fn version(v: hyper::Version) -> &'static str {
    match v {
        hyper::Version::HTTP_10 => "HTTP/1.0",
        hyper::Version::HTTP_09 => "HTTP/0.9",
        _ => "HTTP/1.1",
    }
}

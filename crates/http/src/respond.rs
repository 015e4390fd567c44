//! HTTP responses: from a worker's encoded answer, or from the front itself.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use crate::wire;

/// Headers a worker may not set: the front frames the body itself, and
/// hop-by-hop headers belong to the front's connection.
const FRAMING: [&str; 5] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
];

/// The response made of a worker's encoded answer, read in place (the
/// body copied once); an answer that is not a valid encoded response (or
/// carries a header or a status HTTP cannot: a 1xx) is a 502 and the
/// reason why.
pub(crate) fn from_worker(answer: &[u8]) -> Result<Response<Full<Bytes>>, String> {
    let r = wire::ResponseView::parse(answer)
        .map_err(|e| format!("the worker's answer is unusable: {e}"))?;
    // A 1xx is no final status: hyper would send a 500 instead (a bare 101
    // for 101) and close the connection.
    let status = StatusCode::from_u16(r.status)
        .ok()
        .filter(|s| !s.is_informational())
        .ok_or_else(|| format!("the worker answered status {}", r.status))?;
    let mut resp = Response::new(Full::new(Bytes::copy_from_slice(r.body)));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    for (name, value) in r.headers() {
        if FRAMING.iter().any(|f| f.eq_ignore_ascii_case(name)) {
            continue;
        }
        // Lower-cases the name as it parses it.
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("the worker answered an invalid header name {name:?}"))?;
        let v = HeaderValue::from_bytes(value)
            .map_err(|_| format!("the worker answered an invalid value for header {name:?}"))?;
        headers.append(n, v);
    }
    Ok(resp)
}

/// A response of the front's own: the status and its reason phrase as a
/// plain-text body; `close` ends the connection after it.
pub(crate) fn plain(status: u16, close: bool) -> Response<Full<Bytes>> {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let text = format!(
        "{} {}\n",
        code.as_u16(),
        code.canonical_reason().unwrap_or("Error")
    );
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=UTF-8"),
    );
    if close {
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

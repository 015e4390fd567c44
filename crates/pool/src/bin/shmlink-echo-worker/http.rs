//! The echo worker's answers to calls from the HTTP front, by path:
//!
//! - `/pid`: its process id; `/fail`: a remote error (the front's 500);
//!   `/crash`: exits without answering (502); `/hang`: never answers (504);
//!   `/sleep/MS`; `/grow/MIB`: keeps MIB more mebibytes, answers its pid;
//! - `/garbage`: an answer that is not an encoded response (502);
//!   `/bad-header`: a header value with a line break (502);
//! - `/status/N`: status N, empty body; `/bytes/KIB`: a body of KIB KiB
//!   (byte `i` is `i * 7 % 251`), answered from memory;
//! - `/sendfile/PATH`: `X-Sendfile: /PATH`; `/accel/PATH`:
//!   `X-Accel-Redirect: /PATH` (each with `x-app: 1` and an empty body);
//! - anything else: 200, `text/plain`, the request as the worker saw it:
//!   `METHOD TARGET PROTOCOL`, the remote address, `name: value` lines, a
//!   blank line and the body.

use std::time::Duration;

use shmlink::RemoteError;
use shmlink_http::wire::{Request, Response};

/// Answers one encoded HTTP request.
pub(crate) fn answer(
    bytes: &[u8],
    resp: &mut Vec<u8>,
    kept: &mut Vec<Vec<u8>>,
) -> Result<(), RemoteError> {
    let req = Request::decode(bytes).map_err(|e| RemoteError::new(400, e.to_string()))?;
    let path = req.target.split('?').next().unwrap_or("");
    let pid = std::process::id().to_string();
    let r = match path {
        "/pid" => Response::new(200, pid),
        "/fail" => return Err(RemoteError::new(42, "asked to fail")),
        "/crash" => std::process::exit(1),
        "/hang" => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        "/garbage" => {
            resp.extend_from_slice(b"this is not an HTTP response");
            return Ok(());
        }
        "/bad-header" => Response::new(200, "").header("x-bad", "a\r\nb"),
        _ => {
            if let Some(ms) = number_after(path, "/sleep/") {
                std::thread::sleep(Duration::from_millis(ms));
                Response::new(200, "slept")
            } else if let Some(us) = number_after(path, "/burn/") {
                // CPU work, not a sleep: the worker's thread stays busy.
                let until = std::time::Instant::now() + Duration::from_micros(us);
                let mut x = 0u64;
                while std::time::Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
                }
                Response::new(200, pid)
            } else if let Some(mib) = number_after(path, "/grow/") {
                kept.push(vec![1u8; (mib as usize) << 20]);
                Response::new(200, pid)
            } else if let Some(file) = path.strip_prefix("/sendfile") {
                Response::new(200, "")
                    .header("x-sendfile", file)
                    .header("x-app", "1")
            } else if let Some(file) = path.strip_prefix("/accel") {
                Response::new(200, "")
                    .header("x-accel-redirect", file)
                    .header("x-app", "1")
            } else if let Some(kib) = number_after(path, "/bytes/") {
                // A body of `kib` KiB, answered from memory.
                let body: Vec<u8> = (0..(kib as usize) << 10)
                    .map(|i| (i * 7 % 251) as u8)
                    .collect();
                Response::new(200, body)
            } else if let Some(status) = number_after(path, "/status/") {
                Response::new(status as u16, "")
            } else {
                Response::new(200, described(&req)).header("content-type", "text/plain")
            }
        }
    };
    r.encode_into(resp);
    Ok(())
}

fn number_after(path: &str, prefix: &str) -> Option<u64> {
    path.strip_prefix(prefix)?.parse().ok()
}

/// The request as text.
fn described(req: &Request) -> Vec<u8> {
    let mut out = format!(
        "{} {} {}\n{}\n",
        req.method, req.target, req.protocol, req.remote
    )
    .into_bytes();
    for (name, value) in &req.headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.push(b'\n');
    }
    out.push(b'\n');
    out.extend_from_slice(&req.body);
    out
}

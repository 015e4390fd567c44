//! The inspecting side of capability bit 8: asks a running server for its
//! sessions and totals (`shmlink inspect`).

use std::time::{Duration, Instant};

use crate::address::Address;
use crate::connect::{handshake_io, open_socket, read_welcome};
use crate::error::{Error, Result};
use crate::link::stream::Patience;
use shmlink_wire::handshake::{self, Hello, Welcome, Wire, CAP_INSPECT};
use shmlink_wire::inspect::{decode_report_header, Report, REPORT_HEADER_LEN};

/// Asks the server at `address` for its inspection report: its sessions
/// (peer pid and uid, transport, age, messages and bytes each way, ring
/// fill, arena bytes) and totals. Only a process of the server's uid, or
/// root, may ask (over a Unix socket); the whole exchange ends by
/// `timeout`.
///
/// # Errors
/// [`Error::Connect`] (no server there), [`Error::Refused`] (not allowed,
/// or a worker port), [`Error::Timeout`], [`Error::Protocol`] (a welcome
/// or report that breaks the rules).
///
/// # Examples
/// ```no_run
/// let report = shmlink::inspect("shm:/run/app.sock", std::time::Duration::from_secs(2))?;
/// for s in &report.sessions {
///     println!("session {} pid {}: {} calls", s.session_id, s.peer_pid, s.messages_in);
/// }
/// # Ok::<(), shmlink::Error>(())
/// ```
pub fn inspect(address: &str, timeout: Duration) -> Result<Report> {
    let addr: Address = address.parse()?;
    let name = addr.to_string();
    let deadline = Instant::now() + timeout;
    let stream = open_socket(&addr, deadline)?;
    let hello = Hello {
        version_min: handshake::PROTOCOL_MIN,
        version_max: handshake::PROTOCOL_MAX,
        wire: if matches!(addr, Address::Shm(_)) {
            Wire::Shm
        } else {
            Wire::Stream
        },
        caps: CAP_INSPECT,
        ring_c2s: 0,
        ring_s2c: 0,
        max_message: shmlink_wire::frame::MIN_MESSAGE_LIMIT as u64,
    };
    let patience = Patience::new(deadline, Duration::ZERO);
    let io = |what, e| handshake_io(&name, what, timeout, e);
    stream
        .set_nonblocking(true)
        .map_err(|e| io("inspection (socket)", e))?;
    // A refusal may come before the hello is read (credentials): a write
    // that fails then still leaves the welcome to read.
    let sent = stream.write_all_by(&hello.encode(), &patience);
    let (welcome, fds) = match read_welcome(&stream, &name, timeout, &patience) {
        Ok(w) => w,
        Err(e) => {
            return Err(sent
                .err()
                .map_or(e, |s| io("inspection (sending hello)", s)))
        }
    };
    let proto = |detail: String| Error::Protocol {
        peer: name.clone(),
        detail,
    };
    match welcome {
        Welcome::Refused { code, message } => {
            return Err(Error::Refused {
                address: name,
                code,
                message,
            })
        }
        Welcome::Accepted { caps, .. } if caps & CAP_INSPECT == 0 => {
            return Err(proto(
                "the server does not support inspection (capability bit 8): a build older than shmlink inspect".into(),
            ))
        }
        Welcome::Accepted { caps, .. } if caps != CAP_INSPECT => {
            return Err(proto(format!(
                "welcome to an inspection agrees to capabilities {caps:#x}, not bit 8 alone"
            )))
        }
        Welcome::Accepted {
            ring_c2s, ring_s2c, ..
        } if ring_c2s != 0 || ring_s2c != 0 || !fds.is_empty() => {
            return Err(proto(
                "welcome to an inspection names rings or carries a descriptor".into(),
            ))
        }
        Welcome::Accepted { .. } => {}
    }
    let mut header = [0u8; REPORT_HEADER_LEN];
    stream
        .read_exact_by(&mut header, &patience)
        .map_err(|e| io("inspection (reading the report)", e))?;
    let (shape, _) = decode_report_header(&header).map_err(|e| proto(e.0))?;
    let mut all = vec![0u8; shape.total_len()];
    all[..REPORT_HEADER_LEN].copy_from_slice(&header);
    stream
        .read_exact_by(&mut all[REPORT_HEADER_LEN..], &patience)
        .map_err(|e| io("inspection (reading the report)", e))?;
    Report::decode(&all).map_err(|e| proto(e.0))
}

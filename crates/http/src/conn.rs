//! Accepting and serving connections, the same for the front and for a
//! worker that serves HTTP itself: hyper serves each connection on a task of
//! its own, with the limits of [`FrontOptions`](crate::FrontOptions); a stop
//! ends the accepting, answers what is in flight and closes the rest.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};

use crate::coarse_timer::CoarseTimer;
use crate::counters::Field;
use crate::request::{answer, Conn, Route, Shared};

/// How long a stop waits for requests in flight.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(5);

/// Connections open, and a wake-up when the last one closes.
#[derive(Default)]
struct Live {
    count: AtomicUsize,
    none_left: Notify,
}

/// Accepts on every listener until `stop` turns true, then stops: the
/// listeners close, every response from then on closes its connection,
/// connections still open after `idle_grace` (those idle in keep-alive)
/// are closed between requests, and requests in flight get up to
/// [`STOP_GRACE`] to finish. Returns when every connection is closed.
pub(crate) async fn serve<R: Route>(
    listeners: Vec<TcpListener>,
    shared: Arc<Shared<R>>,
    stop: watch::Receiver<bool>,
    idle_grace: Duration,
) {
    let graceful = Arc::new(GracefulShutdown::new());
    let live = Arc::new(Live::default());
    let timer = CoarseTimer::new();
    let sweeping = tokio::spawn(timer.clone().sweep());
    let mut loops = Vec::new();
    for l in listeners {
        let (s, g, lv, tm, mut st) = (
            Arc::clone(&shared),
            Arc::clone(&graceful),
            Arc::clone(&live),
            timer.clone(),
            stop.clone(),
        );
        loops.push(tokio::spawn(async move {
            loop {
                if *st.borrow() {
                    return;
                }
                tokio::select! {
                    _ = st.changed() => {}
                    accepted = l.accept() => match accepted {
                        Ok((stream, peer)) => connection(&s, &g, &lv, &tm, stream, peer),
                        // Out of fds, say: wait a little rather than spin.
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
            }
        }));
    }
    for l in loops {
        let _ = l.await;
    }
    shared.draining.store(true, Ordering::Relaxed);
    if !idle_grace.is_zero() {
        let none_left = async {
            loop {
                let notified = live.none_left.notified();
                if live.count.load(Ordering::Acquire) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(idle_grace, none_left).await;
    }
    if let Ok(g) = Arc::try_unwrap(graceful) {
        let _ = tokio::time::timeout(STOP_GRACE, g.shutdown()).await;
    }
    sweeping.abort();
}

/// Serves one accepted connection on its own task.
fn connection<R: Route>(
    shared: &Arc<Shared<R>>,
    graceful: &GracefulShutdown,
    live: &Arc<Live>,
    timer: &CoarseTimer,
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
) {
    let c = &shared.counters;
    c.add(Field::Connections, 1);
    if c.open_everywhere() >= shared.opts.max_connections as u64 {
        c.add(Field::Refused, 1);
        return; // dropping the stream closes it
    }
    let _ = stream.set_nodelay(true);
    c.add(Field::Open, 1);
    live.count.fetch_add(1, Ordering::AcqRel);
    let conn = Arc::new(Conn {
        remote: peer.to_string(),
        fd: stream.as_raw_fd(),
    });
    let s = Arc::clone(shared);
    let service = service_fn(move |req| {
        let (s, conn) = (Arc::clone(&s), Arc::clone(&conn));
        async move { Ok::<_, std::convert::Infallible>(answer(&s, &conn, req).await) }
    });
    let served = http1::Builder::new()
        .timer(timer.clone())
        .header_read_timeout(shared.opts.header_timeout)
        .max_buf_size(shared.opts.max_header_bytes.max(8192))
        .keep_alive(true)
        // Head and body in one buffer, one write(2): the bodies are small
        // (an answer of a few kilobytes costs one copy, a second iovec
        // costs more in the kernel).
        .writev(false)
        .serve_connection(TokioIo::new(stream), service);
    let served = graceful.watch(served);
    let (s, live) = (Arc::clone(shared), Arc::clone(live));
    tokio::spawn(async move {
        // A client that breaks the protocol or goes away ends its own
        // connection only.
        let _ = served.await;
        s.counters.sub(Field::Open);
        if live.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            live.none_left.notify_waiters();
        }
    });
}

//! Responses the application streams: a head whose body length is not
//! known, then pieces written as the application makes them (chunked in
//! HTTP/1.1, until the connection closes in 1.0), then the end. Each piece
//! is written before the call returns: the engine's thread is the
//! application's (workers mode), so it waits for a client that reads
//! slowly, at most the header timeout without progress, and a client that
//! is gone ends the response with an error the application sees.

use std::time::Instant;

use shmlink_sys::poll::Ready;

use super::reply::{self, Streamed, Terms};
use super::{conn::Phase, Engine, ReqId};
use crate::error::StreamBroken;
use crate::wire::ResponseView;

impl Engine {
    /// Starts streaming the response to `id`: `answer`'s status and headers
    /// now, its body as the first piece.
    ///
    /// # Errors
    /// The client is gone or reads nothing for the header timeout; an
    /// answer HTTP cannot carry (a 502 was sent instead).
    pub(crate) fn stream_begin(&mut self, id: ReqId, answer: &[u8]) -> Result<(), StreamBroken> {
        let slot = self.live(id)?;
        let draining = self.stopping.is_some();
        let date = self.date.at(self.now);
        let Some(c) = self.conns[slot].as_mut() else {
            return Err(gone());
        };
        let Phase::App { head, .. } = &c.phase else {
            return Err(StreamBroken("no request is waiting for this answer".into()));
        };
        let terms = Terms {
            version: head.version,
            head_only: head.head_only,
            close: !head.keep_alive || draining || c.eof,
        };
        let view = ResponseView::parse(answer)
            .map_err(|e| format!("the worker's answer is unusable: {e}"))
            .and_then(|r| reply::stream_head(&mut c.wbuf, &r, terms, date).map(|how| (r, how)));
        let (view, how) = match view {
            Ok(v) => v,
            Err(why) => {
                // Answered 502 as a whole answer would be.
                self.answer(id, Ok(answer));
                return Err(StreamBroken(why));
            }
        };
        reply::stream_piece(&mut c.wbuf, how, view.body);
        c.streaming = Some((how, view.body.len(), view.status));
        self.push(slot)
    }

    /// Writes the next piece of the response streamed to `id`.
    ///
    /// # Errors
    /// As [`Engine::stream_begin`].
    pub(crate) fn stream_write(&mut self, id: ReqId, data: &[u8]) -> Result<(), StreamBroken> {
        let slot = self.live(id)?;
        let Some(c) = self.conns[slot].as_mut() else {
            return Err(gone());
        };
        let Some((how, sent, _)) = c.streaming.as_mut() else {
            return Err(StreamBroken("the response is not being streamed".into()));
        };
        *sent += data.len();
        let how = *how;
        reply::stream_piece(&mut c.wbuf, how, data);
        self.push(slot)
    }

    /// Ends the response streamed to `id`; the connection goes on with its
    /// next request (or closes, in HTTP/1.0).
    ///
    /// # Errors
    /// As [`Engine::stream_begin`].
    pub(crate) fn stream_end(&mut self, id: ReqId) -> Result<(), StreamBroken> {
        let slot = self.live(id)?;
        let draining = self.stopping.is_some();
        let Some(c) = self.conns[slot].as_mut() else {
            return Err(gone());
        };
        let Some((how, sent, status)) = c.streaming.take() else {
            return Err(StreamBroken("the response is not being streamed".into()));
        };
        let Phase::App { head, body_in } = std::mem::replace(&mut c.phase, Phase::Head) else {
            return Err(gone());
        };
        reply::stream_end(&mut c.wbuf, how);
        let close = !head.keep_alive || draining || c.eof || how == Streamed::UntilClose;
        let written = reply::Written { status, body: sent };
        self.answered(slot, &head, body_in, written, close);
        Ok(())
    }

    /// The slot of `id`'s connection, if it is still there.
    fn live(&self, id: ReqId) -> Result<usize, StreamBroken> {
        self.conn(id).map(|_| id.slot).ok_or_else(gone)
    }

    /// Writes what the connection in `slot` holds, waiting while the
    /// client's socket is full; closes it when the client is gone or reads
    /// nothing for the send timeout.
    fn push(&mut self, slot: usize) -> Result<(), StreamBroken> {
        let patience = self.limits.send_timeout;
        let mut deadline = Instant::now() + patience;
        loop {
            let Some(c) = self.conns[slot].as_mut() else {
                return Err(gone());
            };
            let before = c.wbuf.len() - c.wpos;
            if !c.flush() {
                self.abort(slot);
                return Err(gone());
            }
            if c.flushed() {
                return Ok(());
            }
            if c.wbuf.len() - c.wpos < before {
                deadline = Instant::now() + patience;
            }
            match shmlink_sys::poll::writable(&c.sock, Some(deadline)) {
                Ok(Ready::Yes) => {}
                Ok(Ready::HungUp) => {
                    self.abort(slot);
                    return Err(gone());
                }
                Ok(Ready::TimedOut) | Err(_) => {
                    self.abort(slot);
                    return Err(StreamBroken(format!(
                        "the HTTP client read nothing of the streamed response for {patience:?}; \
                         its connection is closed"
                    )));
                }
            }
        }
    }

    /// Ends a streamed response whose client is gone: counted as the
    /// status it started with, the connection closed.
    fn abort(&mut self, slot: usize) {
        if let Some(c) = self.conns[slot].as_mut() {
            if let Some((_, sent, status)) = c.streaming.take() {
                let took = c.started.take().map(|t| t.elapsed()).unwrap_or_default();
                self.counters.answered(status, 0, sent, took);
            }
        }
        self.close(slot);
    }
}

fn gone() -> StreamBroken {
    StreamBroken("the HTTP client closed the connection".into())
}

//! Requests a client pipelined reach a handler together when it asks for
//! them (`Handler::batch_limit` above 1): those already waiting when the
//! session turns to them, up to the limit, in order; each answer goes out
//! as the handler gives it; what the handler leaves unanswered (or cuts
//! short by panicking) fails alone, and the session goes on.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shmlink::{
    BatchAnswer, Client, Error, Handler, RemoteError, CODE_HANDLER_PANICKED, CODE_NOT_ANSWERED,
};

use support::{connect, opts_timeout, start, xform, xform_into, Gate, T};

/// What the batching handler does with a batch.
#[derive(Clone, Copy)]
enum Mode {
    /// Answers every request.
    All,
    /// Answers the first request only, then returns.
    FirstOnly,
    /// Answers the first request, then panics.
    Panics,
}

/// Holds `gate` requests at its gate; records the size of every batch.
struct Batching {
    limit: usize,
    mode: Mode,
    gate: Arc<Gate>,
    sizes: Arc<Mutex<Vec<usize>>>,
}

fn gated(gate: &Gate, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
    if request == b"gate" {
        gate.pass();
    }
    xform_into(request, response);
    Ok(())
}

impl Handler for Batching {
    fn handle(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        gated(&self.gate, request, response)
    }

    fn batch_limit(&self) -> usize {
        self.limit
    }

    fn handle_batch(&self, requests: &[&[u8]], answer: &mut BatchAnswer<'_>) {
        if let Ok(mut s) = self.sizes.lock() {
            s.push(requests.len());
        }
        let mut resp = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            match (self.mode, i) {
                (Mode::FirstOnly, 1..) => return,
                (Mode::Panics, 1..) => panic!("batch handler gave up"),
                _ => {}
            }
            resp.clear();
            xform_into(r, &mut resp);
            answer(Ok(&resp));
        }
    }
}

/// A handler that asks for batches and leaves them to the trait's default
/// `handle_batch`.
struct OnlyLimit {
    gate: Arc<Gate>,
}

impl Handler for OnlyLimit {
    fn handle(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        gated(&self.gate, request, response)
    }

    fn batch_limit(&self) -> usize {
        8
    }
}

struct Setup {
    client: Client,
    gate: Arc<Gate>,
    sizes: Arc<Mutex<Vec<usize>>>,
    _srv: support::Srv,
}

fn setup(t: T, limit: usize, mode: Mode) -> Setup {
    let gate = Arc::new(Gate::closed());
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let handler = Batching {
        limit,
        mode,
        gate: Arc::clone(&gate),
        sizes: Arc::clone(&sizes),
    };
    setup_with(t, handler, gate, sizes)
}

fn setup_with(
    t: T,
    handler: impl Handler,
    gate: Arc<Gate>,
    sizes: Arc<Mutex<Vec<usize>>>,
) -> Setup {
    let srv = start(t, Default::default(), handler);
    let client = connect(&srv.addr, opts_timeout(Duration::from_secs(20)));
    Setup {
        client,
        gate,
        sizes,
        _srv: srv,
    }
}

/// Holds the session at the gate, pipelines `requests` behind it, opens the
/// gate; returns every answer by request index (the gate's first).
fn behind_the_gate(s: &mut Setup, requests: &[&[u8]]) -> Vec<shmlink::Result<Vec<u8>>> {
    let gate_id = s.client.send(b"gate").expect("send gate");
    assert!(
        s.gate.wait_entered(1, Duration::from_secs(10)),
        "the gate call reached the handler"
    );
    let mut index = HashMap::from([(gate_id, 0)]);
    for (i, r) in requests.iter().enumerate() {
        index.insert(s.client.send(r).expect("send"), i + 1);
    }
    s.gate.open();
    let mut out: Vec<Option<shmlink::Result<Vec<u8>>>> =
        (0..=requests.len()).map(|_| None).collect();
    for _ in 0..=requests.len() {
        let reply = s.client.recv().expect("recv");
        let i = index
            .remove(&reply.id)
            .expect("an answer to a call in flight");
        out[i] = Some(reply.result.map_err(Error::Remote));
    }
    out.into_iter().map(|r| r.expect("answered")).collect()
}

/// Every request after the gate was answered with its own transform.
fn all_answered(reqs: &[&[u8]], got: &[shmlink::Result<Vec<u8>>]) {
    for (i, r) in reqs.iter().enumerate() {
        assert_eq!(
            got[i + 1].as_deref().expect("answer"),
            xform(r),
            "request {i}"
        );
    }
}

fn sizes(s: &Setup) -> Vec<usize> {
    s.sizes.lock().expect("sizes").clone()
}

fn code(r: &shmlink::Result<Vec<u8>>) -> u32 {
    match r {
        Err(Error::Remote(e)) => e.code,
        other => panic!("expected a remote error, got {other:?}"),
    }
}

fn waiting_requests_reach_the_handler_together(t: T) {
    let mut s = setup(t, 8, Mode::All);
    let reqs: [&[u8]; 3] = [b"a", b"bb", b"ccc"];
    let got = behind_the_gate(&mut s, &reqs);
    assert_eq!(got[0].as_deref().expect("gate"), xform(b"gate"));
    all_answered(&reqs, &got);
    assert_eq!(sizes(&s), [3], "the three waiting requests, one batch");
    // A lone request goes through `handle`, not a batch of one.
    assert_eq!(s.client.call(b"alone").expect("call"), xform(b"alone"));
    assert_eq!(sizes(&s), [3]);
}

fn batches_stop_at_the_limit(t: T) {
    let mut s = setup(t, 2, Mode::All);
    let reqs: [&[u8]; 5] = [b"1", b"2", b"3", b"4", b"5"];
    let got = behind_the_gate(&mut s, &reqs);
    all_answered(&reqs, &got);
    assert_eq!(sizes(&s), [2, 2], "two batches of two, the fifth alone");
}

fn unanswered_requests_fail_alone(t: T) {
    let mut s = setup(t, 8, Mode::FirstOnly);
    let got = behind_the_gate(&mut s, &[b"x", b"y", b"z"]);
    assert_eq!(got[1].as_deref().expect("first answered"), xform(b"x"));
    assert_eq!(code(&got[2]), CODE_NOT_ANSWERED);
    assert_eq!(code(&got[3]), CODE_NOT_ANSWERED);
    assert_eq!(
        s.client.call(b"after").expect("session goes on"),
        xform(b"after")
    );
}

fn a_panicking_batch_fails_what_it_left(t: T) {
    let mut s = setup(t, 8, Mode::Panics);
    let got = behind_the_gate(&mut s, &[b"x", b"y", b"z"]);
    assert_eq!(got[1].as_deref().expect("first answered"), xform(b"x"));
    for r in &got[2..] {
        assert_eq!(code(r), CODE_HANDLER_PANICKED);
        let Err(Error::Remote(e)) = r else {
            unreachable!()
        };
        assert!(e.message.contains("batch handler gave up"), "{e}");
    }
    assert_eq!(
        s.client.call(b"after").expect("session goes on"),
        xform(b"after")
    );
}

fn the_default_batch_answers_each_through_handle(t: T) {
    let gate = Arc::new(Gate::closed());
    let handler = OnlyLimit {
        gate: Arc::clone(&gate),
    };
    let mut s = setup_with(t, handler, gate, Arc::default());
    let reqs: [&[u8]; 3] = [b"p", b"q", b"r"];
    let got = behind_the_gate(&mut s, &reqs);
    all_answered(&reqs, &got);
}

per_transport!(
    waiting_requests_reach_the_handler_together,
    batches_stop_at_the_limit,
    unanswered_requests_fail_alone,
    a_panicking_batch_fails_what_it_left,
    the_default_batch_answers_each_through_handle,
);

//! Direct lines (capability bit 7) in the core, without `shmlink pool`: a
//! server whose handler lends workers from a worker port (in-process
//! workers on threads). A client's calls switch to the worker once its line
//! is granted; a hand-made client that asks again while its line is out is
//! refused without the handler being asked, and gets a line again once the
//! first is given back or revoked; a server that does not lend refuses the
//! capability.

mod support;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use shmlink::wire::{FrameHeader, Kind, LineBody, LineOp, CAP_LINES, LINE_LEN};
use shmlink::{
    Client, ClientOptions, Handler, LineAsk, LineHold, LineOffer, RemoteError, Server,
    ServerOptions, Worker, WorkerPort,
};
use support::raw::*;
use support::*;

/// Lends the workers it holds, one per ask, and counts the asks it saw.
struct Lender {
    idle: Mutex<Vec<Client>>,
    lent: Arc<Mutex<Vec<Client>>>,
    holds: Arc<Mutex<Vec<LineHold>>>,
    asked: Arc<Mutex<usize>>,
}

impl Handler for Lender {
    fn handle(&self, request: &[u8], response: &mut Vec<u8>) -> Result<(), RemoteError> {
        response.extend_from_slice(b"server:");
        response.extend_from_slice(request);
        Ok(())
    }

    fn line(&self, ask: &LineAsk) -> Option<LineOffer> {
        *self.asked.lock().expect("asked") += 1;
        let mut worker = self.idle.lock().expect("idle").pop()?;
        let (offer, hold) = worker.lend_line(ask, 0, None).expect("lend");
        self.lent.lock().expect("lent").push(worker);
        self.holds.lock().expect("holds").push(hold);
        Some(offer)
    }
}

struct Setup {
    addr: String,
    /// The lent workers' sessions (with their supervisor), in lending order.
    lent: Arc<Mutex<Vec<Client>>>,
    holds: Arc<Mutex<Vec<LineHold>>>,
    asked: Arc<Mutex<usize>>,
    _server: shmlink::RunningServer,
    _port: WorkerPort,
    _dir: TempDir,
}

/// A server lending `workers` in-process workers, which answer `w:REQ`.
fn setup(workers: usize) -> Setup {
    let dir = TempDir::new("lines");
    let port =
        WorkerPort::bind(&T::Shm.bind_addr(&dir, "w"), ServerOptions::default()).expect("port");
    let mut idle = Vec::new();
    for _ in 0..workers {
        let addr = port.address().to_string();
        thread::spawn(move || {
            let mut w = Worker::connect(&addr, ClientOptions::default()).expect("worker");
            let _ = w.run(|req: &[u8], resp: &mut Vec<u8>| {
                resp.extend_from_slice(b"w:");
                resp.extend_from_slice(req);
                Ok(())
            });
        });
        let accepted = port
            .accept(Duration::from_secs(5))
            .expect("accept")
            .expect("a worker");
        assert!(accepted.client.serves_lines());
        idle.push(accepted.client);
    }
    let holds = Arc::new(Mutex::new(Vec::new()));
    let asked = Arc::new(Mutex::new(0));
    let lent = Arc::new(Mutex::new(Vec::new()));
    let lender = Lender {
        idle: Mutex::new(idle),
        lent: Arc::clone(&lent),
        holds: Arc::clone(&holds),
        asked: Arc::clone(&asked),
    };
    let opts = ServerOptions {
        lines: true,
        ..ServerOptions::default()
    };
    let server = Server::bind(&[T::Shm.bind_addr(&dir, "s").as_str()], opts)
        .expect("bind")
        .spawn(lender)
        .expect("spawn");
    let addr = server.addresses()[0].to_string();
    Setup {
        addr,
        lent,
        holds,
        asked,
        _server: server,
        _port: port,
        _dir: dir,
    }
}

#[test]
fn a_client_s_calls_move_to_its_line_once_granted() {
    let s = setup(1);
    let mut c = Client::connect(&s.addr, ClientOptions::default()).expect("connect");
    let mut answered_by = Vec::new();
    for i in 0..40 {
        let req = format!("call {i}");
        let got = String::from_utf8(c.call(req.as_bytes()).expect("call")).expect("utf8");
        let (who, rest) = got.split_once(':').expect("who:request");
        assert_eq!(rest, req, "the answer to this call");
        answered_by.push(who.to_string());
    }
    let first_worker = answered_by.iter().position(|w| w == "w").expect("a line");
    assert!(first_worker > 0, "the first calls go through the server");
    assert!(
        answered_by[first_worker..].iter().all(|w| w == "w"),
        "every call after the grant goes over the line: {answered_by:?}"
    );
    assert_eq!(*s.asked.lock().expect("asked"), 1);
}

/// A hand-made client's ask, and the op of the answer.
fn ask(raw: &mut RawSession) -> (LineOp, u16) {
    let body = LineBody::of(LineOp::Ask, 0).encode();
    raw.send(FrameHeader::whole(Kind::Line, 0, LINE_LEN), &body);
    let (h, payload) = raw.recv().expect("an answer to the ask");
    assert_eq!(h.kind, Kind::Line, "{h:?}");
    // The grant's descriptors wait on the control socket; the body says
    // how many came (the decoder checks the count against the op).
    let b = LineBody::decode(&payload, usize::from(h.fds)).expect("a line body");
    (b.op, h.fds)
}

/// A hand-made client of `s` that asked for a line and was granted one.
fn lined_client(s: &Setup) -> RawSession {
    let mut h = hello(T::Shm);
    h.caps |= CAP_LINES;
    let (_, raw) = RawSession::open(&s.addr, &h);
    let mut raw = raw.expect("accepted");
    assert_eq!(ask(&mut raw), (LineOp::Grant, 2));
    raw
}

#[test]
fn a_client_that_asks_again_while_its_line_is_out_is_refused() {
    let s = setup(3);
    let mut raw = lined_client(&s);
    // Workers are idle, but this client holds a line already.
    assert_eq!(ask(&mut raw), (LineOp::Deny, 0));
    assert_eq!(ask(&mut raw), (LineOp::Deny, 0));
    assert_eq!(
        *s.asked.lock().expect("asked"),
        1,
        "the handler was not asked"
    );
    // The line given back (its hold dropped), the client may have another.
    s.holds.lock().expect("holds").clear();
    assert_eq!(ask(&mut raw), (LineOp::Grant, 2));
    assert_eq!(*s.asked.lock().expect("asked"), 2);
}

#[test]
fn a_client_whose_line_is_revoked_may_be_lent_another_at_once() {
    let s = setup(3);
    let mut raw = lined_client(&s);
    assert_eq!(ask(&mut raw), (LineOp::Deny, 0));
    // Revoked (as at a reload): the worker gives the line back after the
    // call in hand. Its hold is still kept (the worker's `Returned` not
    // read), yet the client need not wait for the supervisor to read it.
    {
        let holds = s.holds.lock().expect("holds");
        let mut lent = s.lent.lock().expect("lent");
        lent[0].revoke_line(&holds[0]).expect("revoke");
    }
    assert_eq!(s.holds.lock().expect("holds").len(), 1, "the hold is kept");
    assert_eq!(ask(&mut raw), (LineOp::Grant, 2));
    assert_eq!(*s.asked.lock().expect("asked"), 2);
}

#[test]
fn a_server_that_lends_nothing_does_not_agree_to_lines() {
    let dir = TempDir::new("nolines");
    let server = Server::bind(
        &[T::Shm.bind_addr(&dir, "s").as_str()],
        ServerOptions::default(),
    )
    .expect("bind")
    .spawn(|req: &[u8], resp: &mut Vec<u8>| {
        resp.extend_from_slice(req);
        Ok(())
    })
    .expect("spawn");
    let addr = server.addresses()[0].to_string();
    let mut h = hello(T::Shm);
    h.caps |= CAP_LINES;
    let (w, raw) = RawSession::open(&addr, &h);
    let shmlink::wire::Welcome::Accepted { caps, .. } = w else {
        panic!("refused: {w:?}");
    };
    assert_eq!(caps & CAP_LINES, 0, "bit 7 not agreed");
    let mut raw = raw.expect("accepted");
    // A line frame on a session without bit 7 is a protocol error.
    let body = LineBody::of(LineOp::Ask, 0).encode();
    raw.send(FrameHeader::whole(Kind::Line, 0, LINE_LEN), &body);
    raw.expect_protocol_goodbye("capability bit 7", "an ask without bit 7");
}

//! The client: calls, pipelining, one-way messages, timeouts.

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::os::fd::BorrowedFd;
use std::time::Duration;

use crate::address::{Address, Transport};
use crate::both_ways::{Incomings, Side};
use crate::connect;
use crate::deadline::Deadline;
use crate::error::{Error, RemoteError, Result};
use crate::message::Message;
use crate::options::ClientOptions;
use crate::response::Response;
use crate::session::Session;
use shmlink_arena::Loan;
use shmlink_wire::frame::Kind;
use shmlink_wire::handshake::{CAP_BOTH_WAYS, CAP_LINES, CAP_SERVE};

mod direct;
mod incoming;

/// Identifies a call sent with [`Client::send`].
pub type CallId = u64;

/// Hashes call ids (sequential integers) with one multiplication instead of
/// SipHash: ids are chosen by us, not by the peer, so there is nothing to
/// defend against, and a call should not pay tens of nanoseconds to hash.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdSet = HashSet<CallId, BuildHasherDefault<IdHasher>>;

/// A response received with [`Client::recv`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The call it answers.
    pub id: CallId,
    /// The response bytes, or the handler's error.
    pub result: std::result::Result<Vec<u8>, RemoteError>,
}

/// A session with a server. Not thread-safe by design (`&mut self`): use one
/// client per thread; moving it between threads is fine (`Send`).
///
/// # Examples
/// ```no_run
/// let mut client = shmlink::Client::connect("shm:/run/app.sock", Default::default())?;
/// let answer = client.call(b"hello")?;
/// # Ok::<(), shmlink::Error>(())
/// ```
#[derive(Debug)]
pub struct Client {
    session: Session,
    options: ClientOptions,
    address: Address,
    next_id: CallId,
    in_flight: IdSet,
    abandoned: IdSet,
    ready: VecDeque<Reply>,
    /// Whether dropping says goodbye to the server (not after `forget`).
    owned: bool,
    /// Where a call's answer is received, and taken from.
    answer: Message,
    /// Whether the server may lend this client a worker's direct line
    /// (capability bit 7: a pool).
    lines: bool,
    /// Its direct line, while one stands, and when it asks next.
    direct: crate::worker::caller::DirectLine,
    /// What the peer sends on its own initiative (calls and one-way
    /// messages), and whether it may.
    incoming: Incomings,
}

impl Client {
    /// Connects and performs the handshake.
    ///
    /// # Errors
    /// Invalid address or options, connection failures, refusals by the
    /// server's policy, handshake timeouts, protocol errors.
    pub fn connect(address: &str, options: ClientOptions) -> Result<Client> {
        let addr: Address = address.parse()?;
        Self::connect_to(&addr, options)
    }

    /// Connects to a parsed address.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn connect_to(address: &Address, options: ClientOptions) -> Result<Client> {
        options.validate()?;
        let session = connect::connect(address, &options, connect::Role::Caller)?;
        Ok(Client::over(
            session,
            address.clone(),
            options,
            Side::Caller,
        ))
    }

    /// An end of an established session: a client's own, a worker port's
    /// session with a worker, or a listener's.
    pub(crate) fn over(
        session: Session,
        address: Address,
        options: ClientOptions,
        side: Side,
    ) -> Client {
        // A worker's session (bit 3) carries its lines' grants the other
        // way: its caller is the supervisor, which makes lines.
        let lines = session.agreed(CAP_LINES) && !session.agreed(CAP_SERVE);
        let incoming = Incomings::new(side, session.agreed(CAP_BOTH_WAYS));
        Client {
            session,
            options,
            address,
            next_id: 1,
            in_flight: IdSet::default(),
            abandoned: IdSet::default(),
            ready: VecDeque::new(),
            owned: true,
            answer: Message::blank(),
            lines,
            direct: Default::default(),
            incoming,
        }
    }

    /// The server's address.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The options in force.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Largest request the server accepts.
    pub fn max_request(&self) -> usize {
        self.session.peer_max()
    }

    /// The transport this session really uses: [`Transport::Unix`] for an
    /// `shm:` session that the server could give no shared memory and that
    /// continues over its socket (see [`ClientOptions::shm_required`]).
    pub fn transport(&self) -> Transport {
        self.session.link().transport()
    }

    /// Whether the session is usable and the server alive (non-blocking check).
    pub fn is_connected(&self) -> bool {
        self.session.is_usable()
    }

    /// Whether a request this client sent provably lies unread by the
    /// server: over `shm:`, still in the ring (the peer's own account of
    /// what it read). After a call failed because the server (or a worker)
    /// died, `true` means that call never reached it and may be made again
    /// elsewhere; `false` means it may have run, or (over `unix:`/`tcp:`)
    /// that nobody can tell.
    pub fn request_unread(&self) -> bool {
        self.session.sent_unread()
    }

    /// Calls with the default timeout.
    ///
    /// # Errors
    /// [`Error::Remote`] when the handler failed; timeouts, size limits, peer
    /// gone, protocol errors.
    pub fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        self.call_timeout(request, self.options.timeout)
    }

    /// Calls with an explicit timeout. A response arriving after the timeout
    /// is discarded when it comes, never returned for another call.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn call_timeout(&mut self, request: &[u8], timeout: Duration) -> Result<Vec<u8>> {
        self.call_with_fds_timeout(request, &[], timeout)
    }

    /// Calls with file descriptors that go with the request (over `shm:` and
    /// `unix:`, to a server that accepts them: at most [`crate::MAX_FDS`]).
    /// The handler receives duplicates; ours stay open.
    ///
    /// # Errors
    /// As [`Client::call`]; also, with nothing sent and the session usable:
    /// [`Error::Unsupported`] over `tcp:`, [`Error::NotAgreed`] when the
    /// server does not accept descriptors, [`Error::BadFds`] for more than
    /// [`crate::MAX_FDS`] or a descriptor that is not open.
    pub fn call_with_fds(&mut self, request: &[u8], fds: &[BorrowedFd<'_>]) -> Result<Vec<u8>> {
        self.call_with_fds_timeout(request, fds, self.options.timeout)
    }

    /// [`Client::call_with_fds`] with an explicit timeout.
    ///
    /// # Errors
    /// As [`Client::call_with_fds`].
    #[inline(always)]
    pub fn call_with_fds_timeout(
        &mut self,
        request: &[u8],
        fds: &[BorrowedFd<'_>],
        timeout: Duration,
    ) -> Result<Vec<u8>> {
        self.exchange(request, fds, timeout)?;
        self.body_of_answer()
    }

    /// Calls with the default timeout and returns the response where it
    /// arrived: a large response that the server lent from its arena
    /// (capability bit 5, over `shm:` and `unix:`) is read in place, without
    /// a copy, and goes back to the server when the [`Response`] is dropped
    /// (its release travels with this client's next message); any other
    /// response comes in a buffer of its own.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn call_response(&mut self, request: &[u8]) -> Result<Response> {
        self.call_response_timeout(request, self.options.timeout)
    }

    /// [`Client::call_response`] with an explicit timeout.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn call_response_timeout(&mut self, request: &[u8], timeout: Duration) -> Result<Response> {
        self.exchange(request, &[], timeout)?;
        self.response_of_answer()
    }

    /// Sends a request (lent from the arena when it is large enough and the
    /// arena has room) and waits for its answer, a response or an error,
    /// received into `self.answer`.
    #[inline(always)]
    fn exchange(
        &mut self,
        request: &[u8],
        fds: &[BorrowedFd<'_>],
        timeout: Duration,
    ) -> Result<()> {
        self.check_may_call()?;
        if self.lines && fds.is_empty() && self.in_flight.is_empty() && self.ready.is_empty() {
            if let Some(r) = self.exchange_on_line(request, timeout) {
                return r;
            }
        }
        if request.len() >= self.options.arena_threshold && fds.is_empty() && self.session.lends() {
            if let Some(r) = self.exchange_copied_into_arena(request, timeout) {
                return r;
            }
        }
        let mut deadline = Deadline::In(timeout);
        // A call's own id is not filed in `in_flight`: `wait_for` matches it
        // directly, so the common one-call-at-a-time case does no set work.
        let id = self.next_id;
        self.session
            .send_with_fds(Kind::Request, id, request, fds, &mut deadline)?;
        self.next_id += 1;
        self.finish_call(id, &mut deadline)
    }

    /// The transparent path of a large call: the request copied once into
    /// the arena and read in place by the server. `None` when the arena has
    /// no room (the call streams instead).
    #[cold]
    #[inline(never)]
    fn exchange_copied_into_arena(
        &mut self,
        request: &[u8],
        timeout: Duration,
    ) -> Option<Result<()>> {
        let mut loan = self.session.loan(request.len()).ok()?;
        loan.fill_from(request);
        Some(self.exchange_loan(loan, timeout))
    }

    /// Sends a request lent from the arena and waits for its answer.
    fn exchange_loan(&mut self, loan: Loan, timeout: Duration) -> Result<()> {
        self.check_may_call()?;
        let mut deadline = Deadline::In(timeout);
        let id = self.next_id;
        self.session.send_loan(id, loan, &mut deadline)?;
        self.next_id += 1;
        self.finish_call(id, &mut deadline)
    }

    /// A buffer of `len` bytes of this client's arena to fill in place, then
    /// send with [`Client::call_loan`]: the server reads it where it lies
    /// (over `shm:` and `unix:`, to a server that takes lent requests).
    /// Dropped unsent, it goes back to the arena.
    ///
    /// # Errors
    /// [`Error::ArenaFull`] with the sizes when the arena (at most
    /// [`ClientOptions::max_arena_bytes`]) cannot hold it now (with
    /// [`ClientOptions::loan_wait`]: not within the timeout);
    /// [`Error::NotAgreed`] when the server takes no lent requests,
    /// [`Error::Unsupported`] over `tcp:`.
    pub fn loan(&mut self, len: usize) -> Result<Loan> {
        match self.session.loan(len) {
            Err(Error::ArenaFull { .. }) if self.options.loan_wait => self.loan_waiting(len),
            r => r,
        }
    }

    /// [`Client::loan`] with [`ClientOptions::loan_wait`]: receives (filing
    /// responses for [`Client::recv`], dropping those of abandoned calls)
    /// until a release makes room, no call is outstanding, or the timeout
    /// passes.
    #[cold]
    fn loan_waiting(&mut self, len: usize) -> Result<Loan> {
        let mut deadline = Deadline::In(self.options.timeout);
        loop {
            if self.in_flight.is_empty() && self.abandoned.is_empty() {
                // Nothing outstanding: no buffer can come back.
                return self.session.loan(len);
            }
            match self.session.recv(&mut deadline) {
                Ok(m) => {
                    if let Some(reply) = self.accept(m)? {
                        self.ready.push_back(reply);
                    }
                }
                Err(Error::Timeout { .. }) => return self.session.loan(len),
                Err(e) => return Err(e),
            }
            match self.session.loan(len) {
                Err(Error::ArenaFull { .. }) => {}
                r => return r,
            }
        }
    }

    /// Calls with a request lent from the arena (see [`Client::loan`]).
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn call_loan(&mut self, loan: Loan) -> Result<Vec<u8>> {
        self.call_loan_timeout(loan, self.options.timeout)
    }

    /// [`Client::call_loan`] with an explicit timeout.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn call_loan_timeout(&mut self, loan: Loan, timeout: Duration) -> Result<Vec<u8>> {
        self.exchange_loan(loan, timeout)?;
        self.body_of_answer()
    }

    /// Bytes of arena this client maps for its loans.
    pub fn arena_bytes(&self) -> u64 {
        self.session.arena_bytes().0
    }

    /// Waits for the answer to call `id`, just sent, into `self.answer`.
    #[inline(always)]
    fn finish_call(&mut self, id: CallId, deadline: &mut Deadline) -> Result<()> {
        match self.wait_for(id, deadline) {
            Err(e @ Error::Timeout { .. }) => {
                self.abandoned.insert(id);
                Err(e)
            }
            r => r,
        }
    }

    /// Sends a request without waiting (pipelining); returns its id.
    ///
    /// # Errors
    /// Size limit (nothing sent), timeout waiting for ring space, peer gone.
    pub fn send(&mut self, request: &[u8]) -> Result<CallId> {
        self.send_with_fds(request, &[])
    }

    /// Sends a request with file descriptors without waiting (pipelining);
    /// returns its id.
    ///
    /// # Errors
    /// As [`Client::send`] and [`Client::call_with_fds`].
    pub fn send_with_fds(&mut self, request: &[u8], fds: &[BorrowedFd<'_>]) -> Result<CallId> {
        self.send_deadline(request, fds, &mut Deadline::In(self.options.timeout))
    }

    fn send_deadline(
        &mut self,
        request: &[u8],
        fds: &[BorrowedFd<'_>],
        deadline: &mut Deadline,
    ) -> Result<CallId> {
        self.check_may_call()?;
        let id = self.next_id;
        self.session
            .send_with_fds(Kind::Request, id, request, fds, deadline)?;
        self.next_id += 1;
        self.in_flight.insert(id);
        self.session.expect_answer();
        Ok(id)
    }

    /// Sends a one-way message: no response, no id.
    ///
    /// # Errors
    /// As [`Client::send`].
    pub fn notify(&mut self, message: &[u8]) -> Result<()> {
        self.check_may_call()?;
        let mut deadline = Deadline::In(self.options.timeout);
        self.session.send(Kind::OneWay, 0, message, &mut deadline)
    }

    /// Number of calls sent and not yet received.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.ready.len()
    }

    /// Receives the next response of a pipelined call, in arrival order.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] when no call is in flight; timeouts, peer gone.
    pub fn recv(&mut self) -> Result<Reply> {
        self.recv_timeout(self.options.timeout)
    }

    /// [`Client::recv`] with an explicit timeout.
    ///
    /// # Errors
    /// As [`Client::recv`].
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Reply> {
        if let Some(r) = self.ready.pop_front() {
            return Ok(r);
        }
        if self.in_flight.is_empty() {
            return Err(Error::NothingInFlight {
                address: self.address.to_string(),
            });
        }
        let mut deadline = Deadline::In(timeout);
        loop {
            let m = self.session.recv(&mut deadline)?;
            if let Some(reply) = self.accept(m)? {
                return Ok(reply);
            }
        }
    }

    /// The descriptor an event loop (epoll, tokio, asyncio, Go's poller,
    /// `stream_select`) watches for this client: it becomes readable when
    /// an answer has begun to arrive after [`Client::try_recv`] found none,
    /// or when the session ends. Made on first use; over `shm:` the server
    /// is then handed an eventfd it rings whenever it would wake this client
    /// (docs/protocol.md, "Loop wake-ups"), so blocking calls and loops mix
    /// freely on one client. The descriptor stays the client's: watch it,
    /// never read or close it.
    ///
    /// # Errors
    /// [`Error::NotAgreed`] over `shm:` with a server of an older build;
    /// out of descriptors; a broken session.
    pub fn poll_fd(&mut self) -> Result<BorrowedFd<'_>> {
        let mut deadline = Deadline::In(self.options.timeout);
        self.session.poll_fd(&mut deadline)
    }

    /// Receives the next answer of a pipelined call if one has arrived,
    /// never waiting for one to begin: `Ok(None)` when none has, and then
    /// the descriptor of [`Client::poll_fd`] (opened before) becomes readable
    /// when one does. An answer whose first bytes are there is received
    /// whole (its other chunks waited for, within the client's timeout).
    /// Answers to abandoned calls are dropped on the way.
    ///
    /// # Errors
    /// [`Error::NothingInFlight`] when no call is in flight; peer gone,
    /// protocol errors.
    pub fn try_recv(&mut self) -> Result<Option<Reply>> {
        if let Some(r) = self.ready.pop_front() {
            return Ok(Some(r));
        }
        if self.in_flight.is_empty() {
            // Nothing is expected: the descriptor goes quiet (a loop that
            // watches it level-triggered must not wake for the last ring),
            // until the session ends or something arrives after all.
            self.session.quiet();
            return Err(Error::NothingInFlight {
                address: self.address.to_string(),
            });
        }
        let mut deadline = Deadline::In(self.options.timeout);
        loop {
            let mut m = Message::blank();
            if !self.session.try_recv_into(&mut deadline, &mut m)? {
                return Ok(None);
            }
            if let Some(reply) = self.accept(m)? {
                return Ok(Some(reply));
            }
        }
    }

    /// Gives up on a call sent with [`Client::send`]: its answer is dropped
    /// when it comes (or now, if it came). `false` when `id` is not in
    /// flight (answered and received, abandoned already, or never sent).
    pub fn abandon(&mut self, id: CallId) -> bool {
        if self.in_flight.remove(&id) {
            self.abandoned.insert(id);
            return true;
        }
        match self.ready.iter().position(|r| r.id == id) {
            Some(at) => self.ready.remove(at).is_some(),
            None => false,
        }
    }

    /// Waits up to `timeout` until the next response has begun to arrive,
    /// without receiving it: `true` when [`Client::recv`] will not wait for
    /// its first bytes (a response streamed in chunks may still be arriving),
    /// `false` when `timeout` passed first. Lets a caller wait briefly where
    /// it must not block for long, then receive or wait elsewhere.
    ///
    /// # Errors
    /// [`Error::NothingInFlight`] when no call is in flight; peer gone,
    /// protocol errors.
    pub fn wait_readable(&mut self, timeout: Duration) -> Result<bool> {
        if !self.ready.is_empty() {
            return Ok(true);
        }
        if self.in_flight.is_empty() {
            return Err(Error::NothingInFlight {
                address: self.address.to_string(),
            });
        }
        self.session.wait_readable(&mut Deadline::In(timeout))
    }

    /// The bytes of the answer in `self.answer` (copied out of the server's
    /// arena when it was lent), or the error it carries.
    #[inline(always)]
    fn body_of_answer(&mut self) -> Result<Vec<u8>> {
        let m = &mut self.answer;
        if m.kind == Kind::Response && !m.has_extra() {
            return Ok(std::mem::take(&mut m.body));
        }
        let m = std::mem::replace(m, Message::blank());
        into_result(m, self.session.address()).map_err(|e| self.protocol_or_remote(e))
    }

    /// The answer in `self.answer` as a [`Response`], or the error it
    /// carries.
    fn response_of_answer(&mut self) -> Result<Response> {
        let m = std::mem::replace(&mut self.answer, Message::blank());
        if m.kind == Kind::Response {
            return Ok(Response::from_message(m));
        }
        let e = remote_error(&m.body, self.session.address());
        Err(self.protocol_or_remote(e))
    }

    /// Receives until the answer to `id` arrives, into `self.answer`,
    /// filing responses to other calls (pipelined ones) for
    /// [`Client::recv`].
    #[inline(always)]
    fn wait_for(&mut self, id: CallId, deadline: &mut Deadline) -> Result<()> {
        loop {
            self.session.recv_into(deadline, &mut self.answer)?;
            let m = &self.answer;
            if m.id == id && matches!(m.kind, Kind::Response | Kind::Error) {
                return Ok(());
            }
            let other = std::mem::replace(&mut self.answer, Message::blank());
            if let Some(reply) = self.accept(other)? {
                self.ready.push_back(reply);
            }
        }
    }

    /// Passes a remote error on; a protocol error is reported to the server
    /// (a `Goodbye` saying why) and ends the session.
    #[cold]
    fn protocol_or_remote(&mut self, e: Error) -> Error {
        match e {
            Error::Protocol { detail, .. } => self.session.violation(detail),
            e => {
                if e.is_fatal() {
                    self.session.break_with(e.to_string());
                }
                e
            }
        }
    }

    /// Files a response: `None` when it answers an abandoned call.
    fn accept(&mut self, m: Message) -> Result<Option<Reply>> {
        if m.kind == Kind::Line {
            // A grant or refusal that came after its ask gave up waiting.
            self.take_line_frame(m)?;
            return Ok(None);
        }
        if self.incoming.takes(&m) {
            // The peer's own call or message (capability bit 10).
            self.take_incoming(m)?;
            return Ok(None);
        }
        if !matches!(m.kind, Kind::Response | Kind::Error) {
            let detail = format!(
                "the peer (server or worker) sent a {:?} frame; only responses, errors and goodbyes are expected",
                m.kind
            );
            return Err(self.session.violation(detail));
        }
        if self.abandoned.remove(&m.id) {
            return Ok(None);
        }
        if !self.in_flight.remove(&m.id) {
            let detail = format!("response for call {} which is not in flight", m.id);
            return Err(self.session.violation(detail));
        }
        let id = m.id;
        let result = match into_result(m, self.session.address()) {
            Ok(body) => Ok(body),
            Err(Error::Remote(r)) => Err(r),
            Err(e) => return Err(self.protocol_or_remote(e)),
        };
        Ok(Some(Reply { id, result }))
    }

    /// Hands a response buffer back for reuse: the next response is received
    /// into its allocation, so a caller that recycles each response makes
    /// calls without allocating.
    pub fn recycle(&mut self, buffer: Vec<u8>) {
        self.session.recycle(buffer);
    }

    /// Closes the session (also done on drop).
    pub fn close(self) {}

    /// Releases this process's copy of the session without telling the
    /// server anything: its descriptors are closed and its mapping unmapped,
    /// but no `Goodbye` goes on the ring. For the child of a `fork()` that
    /// inherited a client its parent keeps using: dropping it there would
    /// end the parent's session.
    pub fn forget(mut self) {
        self.owned = false;
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if self.owned {
            self.direct.close();
            self.session.say_goodbye();
        }
    }
}

#[inline(always)]
fn into_result(m: Message, peer: &str) -> Result<Vec<u8>> {
    match m.kind {
        Kind::Response if !m.has_extra() => Ok(m.body),
        Kind::Response => Ok(Response::from_message(m).into_vec()),
        _ => Err(remote_error(&m.body, peer)),
    }
}

/// The error an `Error` response carries, or why its body is malformed.
#[cold]
fn remote_error(body: &[u8], peer: &str) -> Error {
    match RemoteError::decode(body) {
        Ok(r) => Error::Remote(r),
        Err(e) => Error::Protocol {
            peer: peer.to_string(),
            detail: e.0,
        },
    }
}

package shmlink

/*
#include "shim.h"

#cgo noescape gs_call
#cgo nocallback gs_call
#cgo noescape gs_send
#cgo nocallback gs_send
#cgo nocallback gs_recv
#cgo noescape gs_notify
#cgo nocallback gs_notify
#cgo nocallback shmlink_client_in_flight
#cgo noescape shmlink_client_in_flight
#cgo noescape gs_send_wait
#cgo nocallback gs_send_wait
#cgo nocallback gs_try_receive
#cgo noescape gs_try_receive
#cgo nocallback shmlink_client_abandon
#cgo noescape shmlink_client_abandon
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// WaitStrategy is how a side waits for the other on shm: sessions.
type WaitStrategy uint32

// Wait strategies (SHMLINK_WAIT_*).
const (
	// WaitDefault: the library default (adaptive: spins while its CPU is
	// free, as long as recent waits predict, up to 400 µs; sleeps as soon as
	// another thread wants its CPU). WaitSpin with Spin 0 is the same.
	WaitDefault WaitStrategy = C.SHMLINK_WAIT_DEFAULT
	// WaitSleep: sleep on the futex at once (lowest CPU).
	WaitSleep WaitStrategy = C.SHMLINK_WAIT_SLEEP
	// WaitSpin: spin up to Spin, then sleep.
	WaitSpin WaitStrategy = C.SHMLINK_WAIT_SPIN
	// WaitBusy: never sleep (lowest latency, a full core while waiting).
	WaitBusy WaitStrategy = C.SHMLINK_WAIT_BUSY
)

// Options of a client; zero values mean the library's defaults.
type Options struct {
	// Timeout of connecting and the default of each call (0: 5 s).
	Timeout time.Duration
	// Wait strategy on shm: sessions.
	Wait WaitStrategy
	// Spin time for WaitSpin (0: 50 µs).
	Spin time.Duration
	// Ring bytes per direction on shm: sessions, a power of two (0: 64 KiB).
	RingSize uint64
	// Largest message sent or accepted (0: 64 MiB).
	MaxMessageSize uint64
	// An shm: session the server cannot give shared memory (its limit
	// reached, memfd or mmap failing) continues over its socket
	// (Transport says "unix"); with ShmRequired, Dial fails instead with
	// the server's reason.
	ShmRequired bool
}

// CallID identifies a pipelined call (Send/Recv).
type CallID uint64

// Client is a session with a server.
//
// A Client is safe for use from several goroutines. A mutex serialises the
// calls into the C library (whose client is one thread at a time). A call
// with a context that can be cancelled (or that has a deadline) holds it
// only to send and to take what has arrived: it waits for its answer
// without it, so many such calls from many goroutines are in flight on one
// client at once, each matched to its answer by id. A call with a context
// that cannot be cancelled (context.Background()) made while no such call
// waits holds the mutex for the whole call (one cgo crossing, the fastest
// path); goroutines sharing a client then take turns. For parallel calls
// without contexts, give each goroutine its own Client.
type Client struct {
	mu      sync.Mutex
	c       *C.gs_client // nil once closed
	timeout time.Duration

	// Pipelining: calls made with Send whose answers Recv has not returned
	// yet, the answers to them taken while other calls waited (returned
	// first by Recv, in arrival order), and the Recvs waiting for one.
	sent    int
	pending []reply
	recvq   []*waiter

	// Calls waiting for their answers without holding mu, by id.
	waits map[CallID]*waiter
	// The waiter that watches the readiness descriptor now (nil: none),
	// and the watch's turn: a channel that holds one token while nobody
	// watches. A waiter that takes the token watches until its own answer
	// came (or it gives up), taking every answer that arrives and handing
	// each to its caller, then puts the token back for the next one.
	watcher *waiter
	turn    chan struct{}
	// The watcher is taking answers itself (it need not be woken).
	draining bool
	// Wake-ups of watchers (for the tests: a wait without polling wakes
	// only when something arrived or the call gave up).
	wakes int

	// The readiness descriptor of the C client (shmlink_client_fd),
	// duplicated into Go's poller, made on first use.
	rfile *os.File
	rconn syscall.RawConn
	// The server cannot wake loops (an older build: no capability bit 9):
	// waits are made in slices of sliceWait instead.
	sliced bool
	// A call alone on the client first tries to take its answer for up
	// to spinWait in the cgo crossing that sent it (see the constant); 0
	// parks on Go's poller at once.
	spinWait time.Duration
}

type reply struct {
	id   CallID
	data []byte
	err  error
}

// A call (id != 0) or a Recv (id 0) waiting without holding the mutex.
type waiter struct {
	id       CallID
	deadline time.Time
	done     bool       // its answer was handed over (c.mu)
	ch       chan reply // capacity 1: the answer
}

// spinWait: a call alone on its client, in the cgo crossing that sent it,
// waits for its answer in the library's own wait
// (shmlink_client_wait_readable, the spin a blocking call uses) for up to
// this long before it parks on Go's poller: a quick answer so costs one
// crossing and no trip through Go's scheduler. The call is not interrupted
// meanwhile: cancelling is noticed at most this late. wait_readable never
// cuts a streamed answer off (a bounded shmlink_client_recv would, closing
// the session), and try_receive then takes it whole. Polling try_receive
// instead armed the descriptor at each look, so the server rang it for
// every answer: 5.1 µs p50 against 0.7 µs now. Measured against sleeping
// in ppoll on the descriptor after a few µs: the sleep's wake-up cost more
// than Go's poller does on a loaded machine.
const spinWait = 50 * time.Microsecond

// sliceWait bounds each wait of a cancellable call on a session whose
// server cannot ring the client's descriptor (an older build).
const sliceWait = 2 * time.Millisecond

// aLongTimeAgo: a read deadline in the past wakes the watcher at once.
var aLongTimeAgo = time.Unix(1, 0)

// Dial connects to address (shm:PATH, unix:PATH or tcp:HOST:PORT) and
// performs the handshake. opts may be nil.
func Dial(address string, opts *Options) (*Client, error) {
	o := clientOptions(opts)
	timeout := 5 * time.Second
	if opts != nil && opts.Timeout > 0 {
		timeout = opts.Timeout
	}
	g := C.gs_client_new()
	if g == nil {
		return nil, &Error{Op: "dial", Status: StatusIO, Message: "out of memory"}
	}
	addr := C.CString(address)
	defer C.free(unsafe.Pointer(addr))
	if st := C.gs_connect(g, addr, &o); st != C.SHMLINK_OK {
		err := statusError("dial", st, &g.err)
		C.gs_client_free(g)
		return nil, err
	}
	cl := &Client{c: g, timeout: timeout, waits: map[CallID]*waiter{},
		turn: make(chan struct{}, 1), spinWait: spinWait}
	cl.turn <- struct{}{}
	runtime.SetFinalizer(cl, (*Client).Close)
	return cl, nil
}

// clientOptions fills the C options from opts (nil: defaults).
func clientOptions(opts *Options) C.shmlink_client_options {
	var o C.shmlink_client_options
	C.shmlink_client_options_init(&o)
	if opts == nil {
		return o
	}
	if opts.Timeout > 0 {
		o.timeout_us = C.uint64_t(micros(opts.Timeout))
	}
	o.wait = C.uint32_t(opts.Wait)
	if opts.Spin > 0 {
		o.spin_us = C.uint32_t(micros(opts.Spin))
	}
	if opts.RingSize > 0 {
		o.ring_size = C.uint64_t(opts.RingSize)
	}
	if opts.MaxMessageSize > 0 {
		o.max_message_size = C.uint64_t(opts.MaxMessageSize)
	}
	if opts.ShmRequired {
		o.shm_required = 1
	}
	return o
}

// micros rounds a positive duration up to whole microseconds (at least 1).
func micros(d time.Duration) uint64 {
	us := uint64((d + time.Microsecond - 1) / time.Microsecond)
	if us == 0 {
		us = 1
	}
	return us
}

// timeoutFor is the C timeout for ctx: 0 (the client's default) without a
// deadline, else the time left. expired is true when the deadline passed.
func timeoutFor(ctx context.Context) (us uint64, bounded bool, expired bool) {
	d, ok := ctx.Deadline()
	if !ok {
		return 0, false, false
	}
	left := time.Until(d)
	if left <= 0 {
		return 0, true, true
	}
	return micros(left), true, false
}

// deadlineFor is when a wait for ctx ends: its deadline (bounded), or the
// client's default timeout from now.
func (c *Client) deadlineFor(ctx context.Context) (deadline time.Time, bounded bool) {
	if d, ok := ctx.Deadline(); ok {
		return d, true
	}
	return time.Now().Add(c.timeout), false
}

func closedError(op string) error {
	return &Error{Op: op, Status: StatusClosed, Message: "the client is closed"}
}

func ptr(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}

// appendBuf appends the client's response buffer to dst.
func appendBuf(dst []byte, b *C.shmlink_buffer) []byte {
	if b.len == 0 {
		if dst == nil {
			return []byte{}
		}
		return dst
	}
	return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(b.data)), int(b.len))...)
}

// Call sends req and waits for its response, copied into new Go memory.
//
// Contexts: a context already done returns ctx.Err() without sending.
// context.Background() (a context that cannot be cancelled) waits up to the
// client's default timeout (Options.Timeout). A context that can be
// cancelled, or has a deadline, is watched while the call waits, without
// polling: cancelling it returns ctx.Err() (context.Canceled) at once, and
// its deadline passing returns an error that matches both ErrTimeout and
// context.DeadlineExceeded. Either way the call is abandoned: its late
// response is dropped by the library when it comes, never returned to a
// later Call or Recv, and the session stays usable.
//
// Cost: context.Background() on a client where no cancellable call waits
// makes one cgo crossing (the C call sends and waits). A cancellable call
// alone on its client sends and tries to take its answer for up to 50 µs
// in one crossing too; an answer slower than that, or a call among others
// in flight, parks the goroutine on Go's poller (the client's descriptor,
// shmlink_client_fd) until an answer arrives: no thread blocked, no
// polling.
func (c *Client) Call(ctx context.Context, req []byte) ([]byte, error) {
	return c.CallAppend(ctx, nil, req)
}

// CallAppend is Call, appending the response to dst (which may be reused to
// avoid an allocation per call).
func (c *Client) CallAppend(ctx context.Context, dst, req []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	us, bounded, expired := timeoutFor(ctx)
	if expired {
		return dst, context.DeadlineExceeded
	}
	c.mu.Lock()
	g := c.c
	if g == nil {
		c.mu.Unlock()
		return dst, closedError("call")
	}
	if ctx.Done() != nil || !c.quietLocked() {
		return c.callWaiting(ctx, dst, req) // unlocks
	}
	st := C.gs_call(g, ptr(req), C.size_t(len(req)), C.uint64_t(us))
	runtime.KeepAlive(req)
	if st != C.SHMLINK_OK {
		err := c.fail("call", st, bounded)
		c.mu.Unlock()
		return dst, err
	}
	dst = appendBuf(dst, &g.buf)
	c.mu.Unlock()
	return dst, nil
}

// quietLocked: no call or Recv waits without holding the mutex (a
// blocking call may then hold it for its whole wait).
func (c *Client) quietLocked() bool {
	return len(c.waits) == 0 && len(c.recvq) == 0 && c.watcher == nil
}

// callWaiting sends req, then waits for its answer without holding the
// mutex, watching ctx. Called with c.mu held; unlocks it.
func (c *Client) callWaiting(ctx context.Context, dst, req []byte) ([]byte, error) {
	g := c.c
	deadline, bounded := c.deadlineFor(ctx)
	if err := c.pollerLocked("call"); err != nil {
		c.mu.Unlock()
		return dst, err
	}
	var id CallID
	if c.spinWait > 0 && c.sent == 0 && c.quietLocked() {
		// Alone on the client: send and wait briefly in one crossing
		// (nothing else is in flight, so the answer that comes is this
		// call's; see spinWait).
		wait := max(min(c.spinWait, time.Until(deadline)), 0)
		st := C.gs_send_wait(g, ptr(req), C.size_t(len(req)), C.uint64_t(wait))
		runtime.KeepAlive(req)
		if g.sent == 0 {
			err := c.fail("call", st, false)
			c.mu.Unlock()
			return dst, err
		}
		id = CallID(g.sent)
		switch {
		case (st == C.SHMLINK_OK || st == C.SHMLINK_E_REMOTE) && CallID(g.id) == id:
			if st != C.SHMLINK_OK {
				err := c.fail("call", st, false)
				c.mu.Unlock()
				return dst, err
			}
			dst = appendBuf(dst, &g.buf)
			c.mu.Unlock()
			return dst, nil
		case st == C.SHMLINK_OK || st == C.SHMLINK_E_REMOTE:
			c.fileLocked(st, CallID(g.id))
		case st == C.SHMLINK_E_WOULD_BLOCK:
			// Not yet: park below.
		default:
			// The session failed (the peer gone, ...): the call with it.
			err := c.fail("call", st, false)
			c.mu.Unlock()
			return dst, err
		}
	} else {
		st := C.gs_send(g, ptr(req), C.size_t(len(req)))
		runtime.KeepAlive(req)
		if st != C.SHMLINK_OK {
			err := c.fail("call", st, false)
			c.mu.Unlock()
			return dst, err
		}
		id = CallID(g.id)
	}
	w := &waiter{id: id, deadline: deadline, ch: make(chan reply, 1)}
	c.waits[id] = w
	c.afterSendLocked() // after filing w: the drain may take its answer
	c.mu.Unlock()
	r, err := c.await(ctx, w, bounded, "call")
	if err == nil {
		err = r.err
	}
	if err != nil {
		return dst, err
	}
	if dst == nil {
		return r.data, nil
	}
	return append(dst, r.data...), nil
}

// pollerLocked makes the client's readiness descriptor and puts a
// duplicate of it in Go's poller, once. A server of an older build cannot
// ring it: the client then waits in slices.
func (c *Client) pollerLocked(op string) error {
	if c.rconn != nil || c.sliced {
		return nil
	}
	var fd C.int
	st := C.gs_fd(c.c, &fd)
	if st == C.SHMLINK_E_INVALID_ARGUMENT {
		// Error::NotAgreed (capability bit 9, loop wake-ups, not agreed:
		// the server is of an older build); the C ABI reports it so.
		C.gs_err_clear(&c.c.err)
		c.sliced = true
		return nil
	}
	if st != C.SHMLINK_OK {
		return c.fail(op, st, false)
	}
	f, rc, err := pollable(int(fd))
	if err != nil {
		return &Error{Op: op, Status: StatusIO,
			Message: "cannot watch the client's descriptor with Go's poller: " + err.Error()}
	}
	c.rfile, c.rconn = f, rc
	return nil
}

// pollable duplicates fd (the library keeps its own; the duplicate refers
// to the same epoll set) and registers the duplicate with Go's poller.
func pollable(fd int) (*os.File, syscall.RawConn, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return nil, nil, errno
	}
	// O_NONBLOCK (on the shared open file) makes os.NewFile register it;
	// nothing reads an epoll set, and epoll_wait does not look at it.
	if err := syscall.SetNonblock(int(r), true); err != nil {
		syscall.Close(int(r))
		return nil, nil, err
	}
	f := os.NewFile(r, "shmlink-readiness")
	if err := f.SetReadDeadline(time.Time{}); err != nil { // not in the poller
		f.Close()
		return nil, nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, rc, nil
}

// afterSendLocked: a send may have taken answers off the incoming ring
// (the library files them while it waits for room), which will not make
// the descriptor readable: a watcher waiting on it gets them now.
func (c *Client) afterSendLocked() {
	if c.watcher != nil && !c.sliced {
		c.drainLocked()
	}
}

// await waits for w's answer, ctx, w's deadline or the end of the session,
// watching the descriptor when it is its turn. Called without c.mu.
func (c *Client) await(ctx context.Context, w *waiter, bounded bool, op string) (reply, error) {
	var expiry <-chan time.Time
	for {
		select {
		case r := <-w.ch:
			return r, nil
		case <-c.turn:
		default:
			if expiry == nil && !bounded {
				t := time.NewTimer(time.Until(w.deadline))
				defer t.Stop()
				expiry = t.C
			}
			select {
			case r := <-w.ch:
				return r, nil
			case <-ctx.Done():
				return c.giveUp(w, ctx.Err(), op)
			case <-expiry:
				return c.giveUp(w, nil, op)
			case <-c.turn:
			}
		}
		// This waiter's turn to watch (it gives the turn back).
		c.watch(ctx, w)
		if r, ok := c.checkDone(w); ok {
			return r, nil
		}
		if err := ctx.Err(); err != nil {
			return c.giveUp(w, err, op)
		}
		if !time.Now().Before(w.deadline) {
			if bounded {
				return c.giveUp(w, context.DeadlineExceeded, op)
			}
			return c.giveUp(w, nil, op)
		}
	}
}

// checkDone returns w's answer if it was handed over.
func (c *Client) checkDone(w *waiter) (reply, bool) {
	select {
	case r := <-w.ch:
		return r, true
	default:
		return reply{}, false
	}
}

// watch waits on the descriptor in Go's poller (no thread blocked, no
// polling), taking every answer that arrives, until w's came, ctx is done,
// w's deadline passed or the client closed. Holds the turn; gives it back.
func (c *Client) watch(ctx context.Context, w *waiter) {
	defer func() { c.turn <- struct{}{} }()
	c.mu.Lock()
	if w.done || c.c == nil {
		c.mu.Unlock()
		return
	}
	if c.sliced {
		c.mu.Unlock()
		c.watchSliced(ctx, w)
		return
	}
	c.watcher = w
	rc := c.rconn
	c.rfile.SetReadDeadline(w.deadline)
	c.mu.Unlock()
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			c.mu.Lock()
			if c.watcher == w {
				c.kickLocked()
			}
			c.mu.Unlock()
		})
		defer stop()
	}
	// Called by the poller once the read is prepared, then at each
	// readiness: arming the descriptor (try_receive finding nothing) after
	// the preparation loses no wake-up.
	ready := func(uintptr) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.wakes++
		if w.done || c.c == nil {
			return true
		}
		c.draining = true
		c.drainLocked()
		c.draining = false
		return w.done || c.c == nil
	}
	for {
		err := rc.Read(ready)
		c.mu.Lock()
		leave := w.done || c.c == nil || ctx.Err() != nil || !time.Now().Before(w.deadline)
		if !leave && err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			// Go's poller failed: nothing can wait on this client.
			c.failAllLocked(&Error{Op: "call", Status: StatusIO,
				Message: "waiting on the client's descriptor: " + err.Error()})
			leave = true
		}
		if leave {
			c.watcher = nil
		} else {
			// Woken by a stale kick (another call's): wait on.
			c.rfile.SetReadDeadline(w.deadline)
		}
		c.mu.Unlock()
		if leave {
			return
		}
	}
}

// watchSliced is watch for a session whose server cannot ring the
// descriptor: it waits in the library in slices of sliceWait, ctx checked
// between them.
func (c *Client) watchSliced(ctx context.Context, w *waiter) {
	for {
		c.mu.Lock()
		if w.done || c.c == nil || ctx.Err() != nil || !time.Now().Before(w.deadline) {
			c.mu.Unlock()
			return
		}
		c.wakes++
		g := c.c
		st := C.gs_recv(g, C.uint64_t(micros(min(time.Until(w.deadline), sliceWait))))
		switch st {
		case C.SHMLINK_OK, C.SHMLINK_E_REMOTE:
			c.fileLocked(st, CallID(g.id))
		case C.SHMLINK_E_TIMEOUT:
			C.gs_err_clear(&g.err)
		default:
			c.failAllLocked(c.fail("call", st, false))
		}
		c.mu.Unlock()
	}
}

// kickLocked wakes the watcher from its wait.
func (c *Client) kickLocked() {
	if c.rfile != nil {
		c.rfile.SetReadDeadline(aLongTimeAgo)
	}
}

// drainLocked takes every answer that has arrived and hands each to its
// caller, arming the descriptor when none is left.
func (c *Client) drainLocked() {
	g := c.c
	for {
		st := C.gs_try_receive(g)
		switch st {
		case C.SHMLINK_OK, C.SHMLINK_E_REMOTE:
			c.fileLocked(st, CallID(g.id))
		case C.SHMLINK_E_WOULD_BLOCK:
			return
		default:
			// The session failed (or, which no waiter should see, no
			// call is in flight): no answer will come for the waiters.
			err := c.fail("call", st, false)
			if len(c.waits) > 0 || len(c.recvq) > 0 {
				c.failAllLocked(err)
			}
			return
		}
	}
}

// fileLocked hands the answer in the client's buffer (status st, call id)
// to the call waiting for it, else to a waiting Recv, else keeps it for
// Recv.
func (c *Client) fileLocked(st C.int32_t, id CallID) {
	w := c.waits[id]
	op := "recv"
	if w != nil {
		op = "call"
	}
	r := reply{id: id}
	if st == C.SHMLINK_OK {
		r.data = appendBuf(nil, &c.c.buf)
	} else {
		r.err = c.fail(op, st, false)
	}
	if w != nil {
		delete(c.waits, id)
		c.deliverLocked(w, r)
		return
	}
	if len(c.pending) >= c.sent {
		// For no call this client waits for (cannot happen: abandoned
		// calls' answers are dropped by the library).
		return
	}
	if len(c.recvq) > 0 {
		w = c.recvq[0]
		c.recvq[0] = nil
		c.recvq = c.recvq[1:]
		c.sent--
		c.deliverLocked(w, r)
		return
	}
	c.pending = append(c.pending, r)
}

// deliverLocked hands r to w, waking it if it is the watcher in its wait.
func (c *Client) deliverLocked(w *waiter, r reply) {
	w.done = true
	w.ch <- r
	if w == c.watcher && !c.draining {
		c.kickLocked()
	}
}

// failAllLocked ends every waiting call and Recv with err.
func (c *Client) failAllLocked(err error) {
	for id, w := range c.waits {
		delete(c.waits, id)
		c.deliverLocked(w, reply{id: id, err: err})
	}
	for _, w := range c.recvq {
		c.deliverLocked(w, reply{err: err})
	}
	c.recvq = nil
}

// giveUp ends w's wait without its answer: ctxErr is ctx.Err() (nil: the
// client's default timeout passed). A call is abandoned (its answer
// dropped when it comes); a Recv leaves its call in flight. If the answer
// was handed over meanwhile, it is returned instead.
func (c *Client) giveUp(w *waiter, ctxErr error, op string) (reply, error) {
	c.mu.Lock()
	if w.done {
		c.mu.Unlock()
		return <-w.ch, nil
	}
	if w.id != 0 {
		delete(c.waits, w.id)
		if c.c != nil {
			C.shmlink_client_abandon(c.c.client, C.uint64_t(w.id))
		}
	} else {
		for i, q := range c.recvq {
			if q == w {
				c.recvq = append(c.recvq[:i], c.recvq[i+1:]...)
				break
			}
		}
	}
	c.mu.Unlock()
	switch ctxErr {
	case nil:
		return reply{}, &Error{Op: op, Status: StatusTimeout,
			Message: fmt.Sprintf("no response within %v (the client's timeout)", c.timeout)}
	case context.DeadlineExceeded:
		return reply{}, &Error{Op: op, Status: StatusTimeout,
			Message: "no response before the context's deadline", ctx: context.DeadlineExceeded}
	}
	return reply{}, ctxErr
}

// fail turns a failed status into an error; bounded: the timeout came from
// the context's deadline (the error then also matches DeadlineExceeded).
func (c *Client) fail(op string, st C.int32_t, bounded bool) error {
	err := statusError(op, st, &c.c.err)
	if e, ok := err.(*Error); ok && bounded && e.Status == StatusTimeout {
		e.ctx = context.DeadlineExceeded
	}
	return err
}

// Send sends a request without waiting for its response (pipelining) and
// returns its id; Recv returns the responses in arrival order.
func (c *Client) Send(req []byte) (CallID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.c
	if g == nil {
		return 0, closedError("send")
	}
	st := C.gs_send(g, ptr(req), C.size_t(len(req)))
	runtime.KeepAlive(req)
	if st != C.SHMLINK_OK {
		return 0, c.fail("send", st, false)
	}
	c.sent++
	id := CallID(g.id)
	c.afterSendLocked()
	return id, nil
}

// Recv receives the next response of a call made with Send, in arrival
// order, waiting until the ctx deadline (or the client's default timeout);
// a cancellable ctx is watched while it waits, as Call's. A call that
// failed remotely returns its id with a *RemoteError. A Recv that times out
// or is cancelled leaves the call in flight: a later Recv can still get it.
// Responses to calls made with Call never come out of Recv.
func (c *Client) Recv(ctx context.Context) (CallID, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if _, _, expired := timeoutFor(ctx); expired {
		return 0, nil, context.DeadlineExceeded
	}
	c.mu.Lock()
	g := c.c
	if g == nil {
		c.mu.Unlock()
		return 0, nil, closedError("recv")
	}
	if len(c.pending) > 0 {
		r := c.pending[0]
		c.pending[0] = reply{}
		c.pending = c.pending[1:]
		c.sent--
		c.mu.Unlock()
		return r.id, r.data, r.err
	}
	if c.sent <= 0 {
		c.mu.Unlock()
		return 0, nil, &Error{Op: "recv", Status: StatusNothingInFlight,
			Message: "no call made with Send is in flight"}
	}
	deadline, bounded := c.deadlineFor(ctx)
	if ctx.Done() == nil && c.quietLocked() {
		// Nothing else waits: wait in the library, holding the client.
		st := C.gs_recv(g, C.uint64_t(micros(time.Until(deadline))))
		id := CallID(g.id)
		var err error
		var data []byte
		switch st {
		case C.SHMLINK_OK:
			c.sent--
			data = appendBuf(nil, &g.buf)
		case C.SHMLINK_E_REMOTE:
			c.sent--
			err = c.fail("recv", st, false)
		default:
			id, err = 0, c.fail("recv", st, bounded)
		}
		c.mu.Unlock()
		return id, data, err
	}
	if err := c.pollerLocked("recv"); err != nil {
		c.mu.Unlock()
		return 0, nil, err
	}
	w := &waiter{deadline: deadline, ch: make(chan reply, 1)}
	c.recvq = append(c.recvq, w)
	c.mu.Unlock()
	r, err := c.await(ctx, w, bounded, "recv")
	if err != nil {
		return 0, nil, err
	}
	return r.id, r.data, r.err
}

// Notify sends a one-way message: no response, no id.
func (c *Client) Notify(msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.c
	if g == nil {
		return closedError("notify")
	}
	st := C.gs_notify(g, ptr(msg), C.size_t(len(msg)))
	runtime.KeepAlive(msg)
	if st != C.SHMLINK_OK {
		return c.fail("notify", st, false)
	}
	c.afterSendLocked()
	return nil
}

// InFlight is the number of calls sent with Send whose responses were not
// yet received.
func (c *Client) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return 0
	}
	return c.sent
}

// Connected reports whether the session is usable and the server alive (a
// non-blocking check).
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return false
	}
	return C.shmlink_client_is_connected(c.c.client) == 1
}

// Transport is the transport the session really uses: "shm", "unix" (also
// an shm: session the server could give no shared memory) or "tcp"; "" once
// closed.
func (c *Client) Transport() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return ""
	}
	switch C.shmlink_client_transport(c.c.client) {
	case C.SHMLINK_TRANSPORT_SHM:
		return "shm"
	case C.SHMLINK_TRANSPORT_UNIX:
		return "unix"
	case C.SHMLINK_TRANSPORT_TCP:
		return "tcp"
	}
	return ""
}

// Timeout is the client's default call timeout.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Close ends the session (the server is told goodbye) and frees it. It
// waits for a call in progress on another goroutine to end. Later calls fail
// with ErrClosed; closing twice is fine.
func (c *Client) Close() error {
	c.mu.Lock()
	g := c.c
	if g == nil {
		c.mu.Unlock()
		return nil
	}
	c.c = nil
	runtime.SetFinalizer(c, nil)
	// Calls waiting without holding the client end with ErrClosed; the
	// one watching the descriptor is woken.
	c.failAllLocked(closedError("call"))
	f := c.rfile
	c.rfile, c.rconn = nil, nil
	if f != nil {
		f.SetReadDeadline(aLongTimeAgo)
	}
	C.gs_close(g)
	C.gs_client_free(g)
	c.mu.Unlock()
	if f != nil {
		// Outside the mutex: closing waits for a watcher still in its
		// wait, which takes the mutex to see the client closed.
		f.Close()
	}
	return nil
}

// ReleaseKeptMappings unmaps the shared-memory segments this process keeps
// mapped for later sessions: a client that closed an shm: session keeps its
// segment mapped (up to 8 segments of at most 4 MiB, for 2 s) in case the
// server gives the same one to its next session. For a process done with
// its sessions that wants the memory back at once; sessions in use are not
// affected. Safe from any goroutine.
func ReleaseKeptMappings() {
	C.shmlink_release_kept_mappings()
}

// crossing makes one cgo call into the library that does no work
// (shmlink_client_in_flight(NULL) returns 0): the price of a crossing, for
// the benchmark.
func crossing() int {
	return int(C.shmlink_client_in_flight(nil))
}

// cInFlight is the C client's own count of calls in flight (for tests;
// c.mu held).
func cInFlight(c *Client) int {
	return int(C.shmlink_client_in_flight(c.c.client))
}

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
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"sync"
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
// A Client is safe for use from several goroutines: a mutex serialises the
// calls into the C library (whose client is one thread at a time), so
// goroutines sharing a client take turns, each call whole. For parallel
// calls, give each goroutine its own Client. Recv holds the mutex while it
// waits, so a Recv waiting on a slow response delays the others' calls.
type Client struct {
	mu      sync.Mutex
	c       *C.gs_client // nil once closed
	timeout time.Duration
	// Calls given up by a cancelled context while in flight: their late
	// responses are dropped when they arrive, never returned.
	abandoned map[CallID]struct{}
	// Responses to Send's calls received while a cancellable Call waited
	// for its own; Recv returns them first.
	pending []reply
}

type reply struct {
	id   CallID
	data []byte
	err  error
}

// cancelSlice bounds each wait of a call whose context can be cancelled
// without a deadline: cancellation is noticed within about this long.
const cancelSlice = 2 * time.Millisecond

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
	cl := &Client{c: g, timeout: timeout, abandoned: map[CallID]struct{}{}}
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
// The context's deadline becomes the call's timeout (a late response is
// discarded by the library, never returned to a later call); without a
// deadline the client's default timeout (Options.Timeout) applies. A context
// already done returns ctx.Err() without sending. A context that can be
// cancelled but has no deadline (an HTTP request's, say) is watched while
// the call waits: cancelling it returns ctx.Err() within about 2 ms, and
// the call's late response is dropped when it arrives, never returned to a
// later Call or Recv. A timeout set by the deadline matches both ErrTimeout
// and context.DeadlineExceeded.
//
// Cost: context.Background() and contexts with a deadline make one cgo
// crossing per call (the C call sends and waits); cancellable contexts
// without a deadline make two or more (send, then waits in slices).
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
	defer c.mu.Unlock()
	g := c.c
	if g == nil {
		return dst, closedError("call")
	}
	if len(c.abandoned) > 0 {
		c.drainAbandoned()
	}
	if !bounded && ctx.Done() != nil {
		return c.callCancellable(ctx, dst, req)
	}
	st := C.gs_call(g, ptr(req), C.size_t(len(req)), C.uint64_t(us))
	runtime.KeepAlive(req)
	if st != C.SHMLINK_OK {
		return dst, c.fail("call", st, bounded)
	}
	return appendBuf(dst, &g.buf), nil
}

// callCancellable sends, then waits in slices of cancelSlice, checking ctx
// between them. Called with c.mu held.
func (c *Client) callCancellable(ctx context.Context, dst, req []byte) ([]byte, error) {
	g := c.c
	st := C.gs_send(g, ptr(req), C.size_t(len(req)))
	runtime.KeepAlive(req)
	if st != C.SHMLINK_OK {
		return dst, c.fail("call", st, false)
	}
	id := CallID(g.id)
	deadline := time.Now().Add(c.timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			c.abandoned[id] = struct{}{}
			return dst, &Error{Op: "call", Status: StatusTimeout,
				Message: fmt.Sprintf("no response within %v", c.timeout)}
		}
		st := C.gs_recv(g, C.uint64_t(micros(min(left, cancelSlice))))
		rid := CallID(g.id)
		switch {
		case (st == C.SHMLINK_OK || st == C.SHMLINK_E_REMOTE) && rid == id:
			if st != C.SHMLINK_OK {
				return dst, c.fail("call", st, false)
			}
			return appendBuf(dst, &g.buf), nil
		case st == C.SHMLINK_OK || st == C.SHMLINK_E_REMOTE:
			c.file(st, rid)
		case st == C.SHMLINK_E_TIMEOUT:
			C.gs_err_clear(&g.err)
			if ctx.Err() != nil {
				c.abandoned[id] = struct{}{}
				return dst, ctx.Err()
			}
		default:
			return dst, c.fail("call", st, false)
		}
	}
}

// drainAbandoned receives the responses that already arrived, without
// waiting, so that abandoned calls' responses do not pile up in a client
// that never calls Recv: theirs are dropped, the others kept for Recv.
// Called with c.mu held.
func (c *Client) drainAbandoned() {
	g := c.c
	for range len(c.abandoned) {
		st := C.gs_recv(g, 1) // 1 µs: only what has arrived
		if st != C.SHMLINK_OK && st != C.SHMLINK_E_REMOTE {
			// Timeout (nothing there yet) or a failure the next call reports.
			C.gs_err_clear(&g.err)
			return
		}
		c.file(st, CallID(g.id))
	}
}

// file keeps a response received for another call than the one waited
// for: dropped if that call was abandoned, else queued for Recv.
func (c *Client) file(st C.int32_t, id CallID) {
	if _, ok := c.abandoned[id]; ok {
		delete(c.abandoned, id)
		C.gs_err_clear(&c.c.err)
		return
	}
	r := reply{id: id}
	if st == C.SHMLINK_OK {
		r.data = appendBuf(nil, &c.c.buf)
	} else {
		r.err = c.fail("recv", st, false)
	}
	c.pending = append(c.pending, r)
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
	return CallID(g.id), nil
}

// Recv receives the next response of a call made with Send, in arrival
// order, waiting until the ctx deadline (or the client's default timeout;
// a cancellable ctx is watched while waiting). A call that failed remotely
// returns its id with a *RemoteError. A Recv that times out or is cancelled
// leaves the call in flight: a later Recv can still get it.
func (c *Client) Recv(ctx context.Context) (CallID, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	_, bounded, expired := timeoutFor(ctx)
	if expired {
		return 0, nil, context.DeadlineExceeded
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.c
	if g == nil {
		return 0, nil, closedError("recv")
	}
	if len(c.pending) > 0 {
		r := c.pending[0]
		c.pending = c.pending[1:]
		return r.id, r.data, r.err
	}
	if len(c.abandoned) > 0 && int(C.shmlink_client_in_flight(g.client)) <= len(c.abandoned) {
		return 0, nil, &Error{Op: "recv", Status: StatusNothingInFlight,
			Message: "no call is in flight (only abandoned ones)"}
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	watch := ctx.Done() != nil
	for {
		left := time.Until(deadline)
		if left <= 0 || (bounded && ctx.Err() == context.DeadlineExceeded) {
			e := &Error{Op: "recv", Status: StatusTimeout, Message: "no response in time"}
			if bounded {
				e.ctx = context.DeadlineExceeded
			}
			return 0, nil, e
		}
		if watch {
			left = min(left, cancelSlice)
		}
		st := C.gs_recv(g, C.uint64_t(micros(left)))
		id := CallID(g.id)
		switch {
		case st == C.SHMLINK_OK || st == C.SHMLINK_E_REMOTE:
			if _, ok := c.abandoned[id]; ok {
				delete(c.abandoned, id)
				C.gs_err_clear(&g.err)
				continue
			}
			if st != C.SHMLINK_OK {
				return id, nil, c.fail("recv", st, false)
			}
			return id, appendBuf(nil, &g.buf), nil
		case st == C.SHMLINK_E_TIMEOUT:
			C.gs_err_clear(&g.err)
			if err := ctx.Err(); err != nil && !(bounded && err == context.DeadlineExceeded) {
				return 0, nil, err
			}
			// A deadline that passed is a timeout, reported at the loop's top.
		default:
			return 0, nil, c.fail("recv", st, false)
		}
	}
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
	return int(C.shmlink_client_in_flight(c.c.client)) - len(c.abandoned) + len(c.pending)
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
	defer c.mu.Unlock()
	g := c.c
	if g == nil {
		return nil
	}
	c.c = nil
	runtime.SetFinalizer(c, nil)
	C.gs_close(g)
	C.gs_client_free(g)
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

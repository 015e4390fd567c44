package shmlink

/*
#include "shim.h"

#cgo noescape gs_worker_respond
#cgo nocallback gs_worker_respond
#cgo nocallback gs_worker_accept
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Worker is a worker process's session with its supervisor, `shmlink pool`:
// the pool's clients call the pool, the pool hands each call to one idle
// worker. Safe for use from several goroutines (a mutex), but a worker
// serves one call at a time: Accept, then Respond or Fail.
type Worker struct {
	mu sync.Mutex
	w  *C.gs_worker // nil once closed
}

// ConnectWorker connects to the pool's worker port at address, or, when
// address is "", at the address in $SHMLINK_WORKER (which `shmlink pool`
// sets for the workers it starts). opts may be nil.
func ConnectWorker(address string, opts *Options) (*Worker, error) {
	o := clientOptions(opts)
	w := C.gs_worker_new()
	if w == nil {
		return nil, &Error{Op: "worker", Status: StatusIO, Message: "out of memory"}
	}
	var addr *C.char
	if address != "" {
		addr = C.CString(address)
		defer C.free(unsafe.Pointer(addr))
	}
	if st := C.gs_worker_connect(w, addr, &o); st != C.SHMLINK_OK {
		err := statusError("worker", st, &w.err)
		C.gs_worker_free(w)
		return nil, err
	}
	wk := &Worker{w: w}
	runtime.SetFinalizer(wk, (*Worker).Close)
	return wk, nil
}

// Accept waits for the next call and returns its request (a copy). stopped
// is true when the supervisor told this worker to stop (recycling, reload,
// shutdown): it should exit. A call accepted before and not answered is
// answered first with CodeNotAnswered.
func (w *Worker) Accept() (req []byte, stopped bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.w
	if g == nil {
		return nil, false, closedError("accept")
	}
	if st := C.gs_worker_accept(g); st != C.SHMLINK_OK {
		return nil, false, statusError("accept", st, &g.err)
	}
	if g.stopped != 0 {
		return nil, true, nil
	}
	req = make([]byte, int(g.req_len))
	if g.req_len > 0 {
		copy(req, unsafe.Slice((*byte)(unsafe.Pointer(g.req)), int(g.req_len)))
	}
	return req, false, nil
}

// Respond answers the call accepted last with resp.
func (w *Worker) Respond(resp []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.w
	if g == nil {
		return closedError("respond")
	}
	st := C.gs_worker_respond(g, ptr(resp), C.size_t(len(resp)))
	runtime.KeepAlive(resp)
	if st != C.SHMLINK_OK {
		return statusError("respond", st, &g.err)
	}
	return nil
}

// Fail answers the call accepted last with a remote error.
func (w *Worker) Fail(code uint32, message string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.w
	if g == nil {
		return closedError("fail")
	}
	msg := C.CString(message)
	defer C.free(unsafe.Pointer(msg))
	if st := C.gs_worker_fail(g, C.uint32_t(code), msg); st != C.SHMLINK_OK {
		return statusError("fail", st, &g.err)
	}
	return nil
}

// Run serves calls with handler until the supervisor says stop (then it
// returns nil) or the session fails. The handler's errors and panics are
// answered as in Server.Serve.
func (w *Worker) Run(handler func([]byte) ([]byte, error)) error {
	for {
		req, stopped, err := w.Accept()
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		resp, code, msg := runHandler(handler, req)
		if code != 0 {
			err = w.Fail(code, msg)
		} else {
			err = w.Respond(resp)
		}
		if err != nil {
			return err
		}
	}
}

// Close ends the worker's session (saying goodbye). Closing twice is fine.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w == nil {
		return nil
	}
	runtime.SetFinalizer(w, nil)
	C.gs_worker_free(w.w)
	w.w = nil
	return nil
}

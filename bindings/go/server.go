package shmlink

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// ServerOptions are a server's options; zero values mean the library's
// defaults.
type ServerOptions struct {
	// Uids allowed besides the server's own.
	AllowedUIDs []uint32
	// Gids allowed (a peer's primary gid).
	AllowedGIDs []uint32
	// Permission bits of the socket files (0: 0600, or 0660 with a group).
	SocketMode uint32
	// Group of the socket files, when SocketGroupSet.
	SocketGroup    uint32
	SocketGroupSet bool
	// Most sessions at once (0: 4096).
	MaxSessions uint32
	// How session threads wait for requests on shm: sessions.
	Wait WaitStrategy
	// Spin time for WaitSpin (0: 50 µs).
	Spin time.Duration
	// Largest message sent or accepted (0: 64 MiB).
	MaxMessageSize uint64
	// Time a connecting client has to send its hello (0: 2 s).
	HandshakeTimeout time.Duration
	// Time writing a response may wait for ring space (0: 5 s).
	SendTimeout time.Duration
	// Most bytes of shm: session segments held at once (64 KiB rings: 132
	// KiB a session); past it sessions continue over their socket, or are
	// refused when the client requires shared memory (0: no limit).
	MaxShmBytes uint64
}

// Handler serves one request. It is called from many session threads at
// once and must be safe for concurrent use. The request is the handler's
// own (a copy). Returning a *RemoteError sends its code and message; any
// other error is sent as CodeHandlerException with err.Error(); a panic is
// recovered and sent as CodeHandlerException. One-way messages (Notify) call
// it too; their response is discarded.
type Handler func(req []byte) ([]byte, error)

// Server listens on one or more addresses.
type Server struct {
	mu      sync.Mutex
	s       *C.shmlink_server // nil once closed
	addrs   []string
	serving bool
	done    chan struct{} // closed when Serve returns
}

// Listen binds every address (shm:, unix:, tcp: in any mix; tcp:HOST:0 picks
// a free port, see Addrs). Clients may connect at once; they are answered
// once Serve runs. opts may be nil.
func Listen(addrs []string, opts *ServerOptions) (*Server, error) {
	n := len(addrs)
	if n == 0 {
		return nil, &Error{Op: "listen", Status: StatusInvalidArgument, Message: "no address"}
	}
	// Everything handed to C lives in C memory (no Go pointer inside it).
	arr := unsafe.Slice((**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof((*C.char)(nil))))), n)
	defer func() {
		for _, p := range arr {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(&arr[0]))
	}()
	for i, a := range addrs {
		arr[i] = C.CString(a)
	}
	o := (*C.shmlink_server_options)(C.calloc(1, C.size_t(unsafe.Sizeof(C.shmlink_server_options{}))))
	defer C.free(unsafe.Pointer(o))
	C.shmlink_server_options_init(o)
	if opts != nil {
		o.allowed_uids, o.allowed_uids_len = cArray(opts.AllowedUIDs)
		defer C.free(unsafe.Pointer(o.allowed_uids))
		o.allowed_gids, o.allowed_gids_len = cArray(opts.AllowedGIDs)
		defer C.free(unsafe.Pointer(o.allowed_gids))
		o.socket_mode = C.uint32_t(opts.SocketMode)
		if opts.SocketGroupSet {
			o.socket_group_set = 1
			o.socket_group = C.uint32_t(opts.SocketGroup)
		}
		if opts.MaxSessions > 0 {
			o.max_sessions = C.uint32_t(opts.MaxSessions)
		}
		o.wait = C.uint32_t(opts.Wait)
		if opts.Spin > 0 {
			o.spin_us = C.uint32_t(micros(opts.Spin))
		}
		if opts.MaxMessageSize > 0 {
			o.max_message_size = C.uint64_t(opts.MaxMessageSize)
		}
		if opts.HandshakeTimeout > 0 {
			o.handshake_timeout_us = C.uint64_t(micros(opts.HandshakeTimeout))
		}
		if opts.SendTimeout > 0 {
			o.send_timeout_us = C.uint64_t(micros(opts.SendTimeout))
		}
		o.max_shm_bytes = C.uint64_t(opts.MaxShmBytes)
	}
	var e C.gs_err
	var s *C.shmlink_server
	if st := C.gs_bind(&arr[0], C.size_t(n), o, &s, &e); st != C.SHMLINK_OK {
		return nil, statusError("listen", st, &e)
	}
	srv := &Server{s: s, done: make(chan struct{})}
	count := int(C.shmlink_server_address_count(s))
	for i := 0; i < count; i++ {
		srv.addrs = append(srv.addrs, C.GoString(C.shmlink_server_address(s, C.size_t(i))))
	}
	return srv, nil
}

func cArray(v []uint32) (*C.uint32_t, C.size_t) {
	if len(v) == 0 {
		return nil, 0
	}
	p := (*C.uint32_t)(C.malloc(C.size_t(4 * len(v))))
	copy(unsafe.Slice((*uint32)(unsafe.Pointer(p)), len(v)), v)
	return p, C.size_t(len(v))
}

// Addrs are the bound addresses, with the real port for tcp:HOST:0.
func (s *Server) Addrs() []string { return append([]string(nil), s.addrs...) }

// Serve answers requests with handler on the library's session threads
// until Stop (or Close); requests already received are answered, sessions
// closed and socket files removed before it returns. Callable once.
func (s *Server) Serve(handler func([]byte) ([]byte, error)) error {
	if handler == nil {
		return &Error{Op: "serve", Status: StatusInvalidArgument, Message: "nil handler"}
	}
	s.mu.Lock()
	if s.s == nil {
		s.mu.Unlock()
		return &Error{Op: "serve", Status: StatusClosed, Message: "the server is closed"}
	}
	if s.serving {
		s.mu.Unlock()
		return &Error{Op: "serve", Status: StatusState, Message: "already serving"}
	}
	s.serving = true
	srv := s.s
	s.mu.Unlock()
	defer close(s.done)

	h := cgo.NewHandle(Handler(handler))
	defer h.Delete()
	var e C.gs_err
	if st := C.gs_serve(srv, C.uintptr_t(h), &e); st != C.SHMLINK_OK {
		return statusError("serve", st, &e)
	}
	return nil
}

// Stop asks Serve to return; it returns at once. Safe from any goroutine.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		C.shmlink_server_stop(s.s)
	}
}

// Close stops the server, waits for Serve to return and frees it.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.s
	if srv == nil {
		s.mu.Unlock()
		return nil
	}
	C.shmlink_server_stop(srv)
	serving := s.serving
	s.mu.Unlock()
	if serving {
		<-s.done
	}
	s.mu.Lock()
	s.s = nil
	s.mu.Unlock()
	C.shmlink_server_free(srv)
	return nil
}

// handle runs the Go handler for one request (called from C on a session
// thread). Nothing may unwind into C: panics are recovered here.
func handle(h cgo.Handle, req []byte) (resp []byte, code uint32, msg string) {
	return runHandler(h.Value().(Handler), req)
}

// runHandler calls handler, turning its error or panic into a remote
// error's code and message (code 0: success).
func runHandler(handler func([]byte) ([]byte, error), req []byte) (resp []byte, code uint32, msg string) {
	defer func() {
		if r := recover(); r != nil {
			resp, code, msg = nil, CodeHandlerException, fmt.Sprintf("panic: %v", r)
		}
	}()
	out, err := handler(req)
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) && re.Code != 0 {
			return nil, re.Code, re.Message
		}
		return nil, CodeHandlerException, err.Error()
	}
	return out, 0, ""
}

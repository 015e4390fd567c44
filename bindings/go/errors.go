package shmlink

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"strings"
)

// Status is a status code of the C library (enum shmlink_status).
type Status int32

// The library's status codes (shmlink.h); only ever appended.
const (
	StatusOK              Status = C.SHMLINK_OK
	StatusInvalidArgument Status = C.SHMLINK_E_INVALID_ARGUMENT
	StatusInvalidAddress  Status = C.SHMLINK_E_INVALID_ADDRESS
	StatusConnect         Status = C.SHMLINK_E_CONNECT
	StatusRefused         Status = C.SHMLINK_E_REFUSED
	StatusTimeout         Status = C.SHMLINK_E_TIMEOUT
	StatusPeerGone        Status = C.SHMLINK_E_PEER_GONE
	StatusClosed          Status = C.SHMLINK_E_CLOSED
	StatusRemote          Status = C.SHMLINK_E_REMOTE
	StatusTooLarge        Status = C.SHMLINK_E_TOO_LARGE
	StatusProtocol        Status = C.SHMLINK_E_PROTOCOL
	StatusBind            Status = C.SHMLINK_E_BIND
	StatusIO              Status = C.SHMLINK_E_IO
	StatusNothingInFlight Status = C.SHMLINK_E_NOTHING_IN_FLIGHT
	StatusInternal        Status = C.SHMLINK_E_INTERNAL
	StatusState           Status = C.SHMLINK_E_STATE
	StatusUnsupported     Status = C.SHMLINK_E_UNSUPPORTED
	StatusArenaFull       Status = C.SHMLINK_E_ARENA_FULL
	// StatusWouldBlock is internal to the binding (nothing has arrived
	// yet); no error this package returns carries it.
	StatusWouldBlock Status = C.SHMLINK_E_WOULD_BLOCK
)

// String is the library's short description of the code.
func (s Status) String() string {
	return C.GoString(C.shmlink_error_string(C.int32_t(s)))
}

// The reserved codes (shmlink.h, from the one registry: crates/wire/src/codes.rs;
// crates/wire/tests/codes.rs checks this list against it).
const (
	// CodeClosed: a goodbye closing normally.
	CodeClosed uint32 = C.SHMLINK_REMOTE_CLOSED
	// CodeHandlerPanicked: a Rust handler panicked; the session survived.
	CodeHandlerPanicked uint32 = C.SHMLINK_REMOTE_HANDLER_PANICKED
	// CodeResponseTooLarge: the response was larger than the client accepts.
	CodeResponseTooLarge uint32 = C.SHMLINK_REMOTE_RESPONSE_TOO_LARGE
	// CodeHandlerException: a handler failed with an error that carried no
	// code of its own (here: a Go error that is not a *RemoteError, or a panic).
	CodeHandlerException uint32 = C.SHMLINK_REMOTE_HANDLER_EXCEPTION
	// CodeProtocolError: a goodbye saying the receiver broke the protocol.
	CodeProtocolError uint32 = C.SHMLINK_REMOTE_PROTOCOL_ERROR
	// CodeShuttingDown: a goodbye saying the server is shutting down.
	CodeShuttingDown uint32 = C.SHMLINK_REMOTE_SHUTTING_DOWN
	// CodeNotAnswered: a worker took its next call without answering this one.
	CodeNotAnswered uint32 = C.SHMLINK_REMOTE_NOT_ANSWERED
	// CodeNoWorker: shmlink pool: no worker became free within the queue timeout.
	CodeNoWorker uint32 = C.SHMLINK_REMOTE_NO_WORKER
	// CodeQueueFull: shmlink pool: the queue of calls waiting for a worker is full.
	CodeQueueFull uint32 = C.SHMLINK_REMOTE_QUEUE_FULL
	// CodeWorkerDied: shmlink pool: the worker running the call died before answering.
	CodeWorkerDied uint32 = C.SHMLINK_REMOTE_WORKER_DIED
	// CodeWorkerTimeout: shmlink pool: the worker did not answer within the call timeout.
	CodeWorkerTimeout uint32 = C.SHMLINK_REMOTE_WORKER_TIMEOUT
	// CodePoolStopping: shmlink pool: the pool is stopping.
	CodePoolStopping uint32 = C.SHMLINK_REMOTE_POOL_STOPPING
	// CodeNoWorkersStart: shmlink pool: no worker can start (every recent start failed).
	CodeNoWorkersStart uint32 = C.SHMLINK_REMOTE_NO_WORKERS_START
	// CodeUnknownCommand: shmlink pool's control socket: unknown command.
	CodeUnknownCommand uint32 = C.SHMLINK_REMOTE_UNKNOWN_COMMAND
)

// Sentinel errors, for errors.Is. Every error this package returns for a
// failed library call is an *Error that matches one or more of them.
var (
	// ErrTimeout: the call, send or receive timed out (also the ctx deadline).
	ErrTimeout = errors.New("shmlink: timed out")
	// ErrClosed: the session is over: closed by this side, by the server, or
	// the server died (ErrPeerGone matches too in that case).
	ErrClosed = errors.New("shmlink: session closed")
	// ErrPeerGone: the server died or closed the session.
	ErrPeerGone = errors.New("shmlink: peer gone")
	// ErrConnect: cannot connect (no server, no permission, bad address) or
	// refused by the server (ErrRefused matches too).
	ErrConnect = errors.New("shmlink: cannot connect")
	// ErrRefused: the server refused the session (policy, limit, version).
	ErrRefused = errors.New("shmlink: refused by the server")
	// ErrProtocol: the peer broke the protocol; the session is closed.
	ErrProtocol = errors.New("shmlink: protocol error")
	// ErrTooLarge: a message larger than the maximum message size; nothing sent.
	ErrTooLarge = errors.New("shmlink: message too large")
	// ErrInvalidArgument: an option out of range, text with a NUL byte, ...
	ErrInvalidArgument = errors.New("shmlink: invalid argument")
	// ErrInvalidAddress: not shm:PATH, unix:PATH or tcp:HOST:PORT.
	ErrInvalidAddress = errors.New("shmlink: invalid address")
	// ErrBind: the server cannot listen on an address.
	ErrBind = errors.New("shmlink: cannot listen")
	// ErrNothingInFlight: Recv with no pipelined call in flight.
	ErrNothingInFlight = errors.New("shmlink: no call in flight")
	// ErrRemote: the handler answered with an error (a *RemoteError).
	ErrRemote = errors.New("shmlink: remote error")
	// ErrIO, ErrInternal, ErrState: the other library statuses.
	ErrIO       = errors.New("shmlink: i/o error")
	ErrInternal = errors.New("shmlink: internal error")
	ErrState    = errors.New("shmlink: wrong state")
)

// Error is a failed library call: its status and the library's detail
// (shmlink_last_error, read on the thread that failed).
type Error struct {
	Op      string // "dial", "call", "send", "recv", "notify", "close", "listen", "serve"
	Status  Status
	Message string
	ctx     error // context.DeadlineExceeded when the ctx deadline set the timeout
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Status.String()
	}
	return "shmlink: " + e.Op + ": " + msg
}

// Is matches the sentinel errors of the status (see the Err* variables),
// and context.DeadlineExceeded for a timeout set by the context's deadline.
func (e *Error) Is(target error) bool {
	if e.ctx != nil && target == e.ctx {
		return true
	}
	switch target {
	case ErrTimeout:
		return e.Status == StatusTimeout
	case ErrClosed:
		return e.Status == StatusClosed || e.Status == StatusPeerGone
	case ErrPeerGone:
		return e.Status == StatusPeerGone
	case ErrConnect:
		return e.Status == StatusConnect || e.Status == StatusRefused || e.Status == StatusInvalidAddress
	case ErrRefused:
		return e.Status == StatusRefused
	case ErrProtocol:
		return e.Status == StatusProtocol
	case ErrTooLarge:
		return e.Status == StatusTooLarge
	case ErrInvalidArgument:
		return e.Status == StatusInvalidArgument
	case ErrInvalidAddress:
		return e.Status == StatusInvalidAddress
	case ErrBind:
		return e.Status == StatusBind
	case ErrNothingInFlight:
		return e.Status == StatusNothingInFlight
	case ErrIO:
		return e.Status == StatusIO
	case ErrInternal:
		return e.Status == StatusInternal
	case ErrState:
		return e.Status == StatusState
	}
	return false
}

// Timeout reports whether the error is a timeout (net.Error style).
func (e *Error) Timeout() bool { return e.Status == StatusTimeout }

// RemoteError is the handler's error: its code and message. A Go handler
// that returns a *RemoteError sends that code; CodeHandlerException is used
// for any other error.
type RemoteError struct {
	Code    uint32
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("shmlink: remote error %d (0x%X): %s", e.Code, e.Code, e.Message)
}

// Is matches ErrRemote.
func (e *RemoteError) Is(target error) bool { return target == ErrRemote }

// statusError turns a failed status and the detail copied by the shim into
// an error value.
func statusError(op string, st C.int32_t, e *C.gs_err) error {
	msg := ""
	if e.msg != nil {
		msg = C.GoString(e.msg)
	}
	code := uint32(e.remote_code)
	C.gs_err_clear(e)
	if Status(st) == StatusRemote {
		// The library's detail reads "remote error CODE: MESSAGE".
		prefix := fmt.Sprintf("remote error %d: ", code)
		return &RemoteError{Code: code, Message: strings.TrimPrefix(msg, prefix)}
	}
	return &Error{Op: op, Status: Status(st), Message: msg}
}

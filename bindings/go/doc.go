// Package shmlink is the Go binding of shmlink: fast request/response calls
// between processes on one Linux host, over shared memory (shm:PATH), Unix
// sockets (unix:PATH) or TCP (tcp:HOST:PORT), with the same API on all three.
//
// It is a cgo wrapper of the C library (libshmlink, the Rust core behind
// bindings/c/include/shmlink.h): the ring, the doorbell, the handshake's
// checks and the crash handling are the code every other binding runs. A
// Client call crosses into C once (the C call sends and waits).
//
// Clients: Dial, then Call, Send/Recv for pipelining, Notify for one-way
// messages, Close. A call with a context that can be cancelled or has a
// deadline waits on the client's descriptor in Go's poller, without
// polling: cancelling returns at once, the call is abandoned and the
// session stays usable; many such calls from many goroutines share one
// client, matched by id. A Client is safe for use from several goroutines
// (a mutex serialises its calls into C; calls without a cancellable
// context hold it for their whole wait).
//
// Servers: Listen, then Serve(handler) until Stop or Close; the handler runs
// on the library's session threads, concurrently, and a *RemoteError it
// returns reaches the caller with its code. Workers of `shmlink pool`:
// ConnectWorker, then Run(handler).
//
// Errors are *Error values matching the sentinels (ErrTimeout, ErrClosed,
// ErrConnect, ErrProtocol, ...) with errors.Is, and *RemoteError for a
// handler's error (errors.As).
//
// Building needs the library: by default the static one staged in the
// repository by `make install PREFIX=$PWD/target/stage`; with the build tag
// shmlink_pkgconfig, the one pkg-config finds. See bindings/go/README.md.
package shmlink

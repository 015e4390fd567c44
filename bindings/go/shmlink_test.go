package shmlink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// goServer starts a Go server on shm, unix and tcp with handler.
func goServer(t testing.TB, handler func([]byte) ([]byte, error)) *Server {
	t.Helper()
	dir := shortDir(t)
	srv, err := Listen([]string{
		"shm:" + filepath.Join(dir, "g.sock"),
		"unix:" + filepath.Join(dir, "u.sock"),
		"tcp:127.0.0.1:0",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(handler) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

func addrOf(t testing.TB, addrs []string, scheme string) string {
	t.Helper()
	for _, a := range addrs {
		if strings.HasPrefix(a, scheme) {
			return a
		}
	}
	t.Fatalf("no %s address in %v", scheme, addrs)
	return ""
}

var schemes = []string{"shm:", "unix:", "tcp:"}

// prefixHandler answers "go:" + request, or fails on request.
func prefixHandler(req []byte) ([]byte, error) {
	switch string(req) {
	case "remote":
		return nil, &RemoteError{Code: 42, Message: "the answer"}
	case "wrapped":
		return nil, fmt.Errorf("context: %w", &RemoteError{Code: 7, Message: "wrapped"})
	case "plain":
		return nil, errors.New("a plain Go error")
	case "panic":
		panic("handler panicked")
	}
	return append([]byte("go:"), req...), nil
}

func TestRoundTripsGoServer(t *testing.T) {
	srv := goServer(t, prefixHandler)
	if got := srv.Addrs(); len(got) != 3 || strings.HasSuffix(got[2], ":0") {
		t.Fatalf("Addrs() = %v, want three with tcp's real port", got)
	}
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(addrOf(t, srv.Addrs(), scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, n := range []int{0, 1, 64, 2048, 65536, 1 << 20} {
				req := pattern(n, byte(n))
				resp, err := c.Call(context.Background(), req)
				if err != nil {
					t.Fatalf("%d B: %v", n, err)
				}
				if want := append([]byte("go:"), req...); !bytes.Equal(resp, want) {
					t.Fatalf("%d B: wrong response (%d B)", n, len(resp))
				}
			}
			// CallAppend reuses the caller's buffer.
			buf := make([]byte, 0, 64)
			buf, err = c.CallAppend(context.Background(), buf[:0], []byte("x"))
			if err != nil || string(buf) != "go:x" {
				t.Fatalf("CallAppend = %q, %v", buf, err)
			}
		})
	}
}

func TestPastMaxShmBytesSessionsUseTheSocketUnlessShmIsRequired(t *testing.T) {
	dir := shortDir(t)
	// Room for one session's segment (64 KiB rings: 132 KiB).
	srv, err := Listen([]string{"shm:" + filepath.Join(dir, "m.sock")}, &ServerOptions{MaxShmBytes: 135168})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(prefixHandler) }()
	defer func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	addr := srv.Addrs()[0]
	first, err := Dial(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := Dial(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if got := [2]string{first.Transport(), second.Transport()}; got != [2]string{"shm", "unix"} {
		t.Fatalf("transports = %v, want [shm unix]", got)
	}
	if resp, err := second.Call(context.Background(), []byte("x")); err != nil || string(resp) != "go:x" {
		t.Fatalf("over the socket: %q, %v", resp, err)
	}
	_, err = Dial(addr, &Options{ShmRequired: true})
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusRefused || !strings.Contains(e.Message, "max_shm_bytes") {
		t.Fatalf("strict dial: %v, want a refusal naming max_shm_bytes", err)
	}
	first.Close()
	if first.Transport() != "" {
		t.Fatalf("closed client's transport = %q", first.Transport())
	}
}

// sessionSegmentMappings counts how many times each shmlink session segment
// is mapped in this process, by inode (/proc/self/maps).
func sessionSegmentMappings(t *testing.T) map[string]int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Split(string(maps), "\n") {
		if !strings.Contains(line, "memfd:shmlink-session") {
			continue
		}
		if f := strings.Fields(line); len(f) > 4 {
			n[f[4]]++
		}
	}
	return n
}

func TestAClosedShmClientsMappingIsKeptUntilReleased(t *testing.T) {
	ReleaseKeptMappings()
	srv := goServer(t, prefixHandler)
	c, err := Dial(addrOf(t, srv.Addrs(), "shm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), []byte("ab")); err != nil {
		t.Fatal(err)
	}
	// The server runs in this process too: the session's segment is the one
	// mapped twice (its prepared segments are mapped once).
	segment := ""
	for inode, count := range sessionSegmentMappings(t) {
		if count == 2 {
			segment = inode
		}
	}
	if segment == "" {
		t.Fatalf("no segment mapped by both sides: %v", sessionSegmentMappings(t))
	}
	c.Close()
	// Closed: the client keeps its mapping, the server its own.
	if got := sessionSegmentMappings(t)[segment]; got != 2 {
		t.Fatalf("after close: segment mapped %d times, want 2 (kept by both sides)", got)
	}
	ReleaseKeptMappings()
	if got := sessionSegmentMappings(t)[segment]; got != 1 {
		t.Fatalf("after release: segment mapped %d times, want 1 (the server's alone)", got)
	}
	again, err := Dial(addrOf(t, srv.Addrs(), "shm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Call(context.Background(), []byte("cd")); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteErrors(t *testing.T) {
	srv := goServer(t, prefixHandler)
	c, err := Dial(addrOf(t, srv.Addrs(), "shm:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cases := []struct {
		req  string
		code uint32
		msg  string
	}{
		{"remote", 42, "the answer"},
		{"wrapped", 7, "wrapped"},
		{"plain", CodeHandlerException, "a plain Go error"},
		{"panic", CodeHandlerException, "panic: handler panicked"},
	}
	for _, tc := range cases {
		_, err := c.Call(context.Background(), []byte(tc.req))
		var re *RemoteError
		if !errors.As(err, &re) || !errors.Is(err, ErrRemote) {
			t.Fatalf("%s: err = %v, want a *RemoteError", tc.req, err)
		}
		if re.Code != tc.code || re.Message != tc.msg {
			t.Fatalf("%s: got code %#x %q, want %#x %q", tc.req, re.Code, re.Message, tc.code, tc.msg)
		}
	}
	// The session survives its handler's errors and panics.
	if resp, err := c.Call(context.Background(), []byte("ok")); err != nil || string(resp) != "go:ok" {
		t.Fatalf("after errors: %q, %v", resp, err)
	}
}

func TestPipelining(t *testing.T) {
	srv := goServer(t, prefixHandler)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(addrOf(t, srv.Addrs(), scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const n = 32
			sent := map[CallID]string{}
			var order []CallID
			for i := 0; i < n; i++ {
				req := fmt.Sprintf("req-%d", i)
				if i == 5 {
					req = "remote"
				}
				id, err := c.Send([]byte(req))
				if err != nil {
					t.Fatal(err)
				}
				sent[id] = req
				order = append(order, id)
			}
			if c.InFlight() != n {
				t.Fatalf("InFlight = %d, want %d", c.InFlight(), n)
			}
			// A Call between Send and Recv gets its own response; the
			// pipelined ones wait for Recv.
			if resp, err := c.Call(context.Background(), []byte("sync")); err != nil || string(resp) != "go:sync" {
				t.Fatalf("Call among pipelined calls: %q, %v", resp, err)
			}
			for i := 0; i < n; i++ {
				id, resp, err := c.Recv(context.Background())
				if id != order[i] {
					t.Fatalf("Recv %d: id %d, want %d", i, id, order[i])
				}
				if sent[id] == "remote" {
					var re *RemoteError
					if !errors.As(err, &re) || re.Code != 42 {
						t.Fatalf("Recv of the failing call: %v", err)
					}
					continue
				}
				if err != nil || string(resp) != "go:"+sent[id] {
					t.Fatalf("Recv %d: %q, %v", i, resp, err)
				}
			}
			if _, _, err := c.Recv(context.Background()); !errors.Is(err, ErrNothingInFlight) {
				t.Fatalf("Recv with nothing in flight: %v", err)
			}
		})
	}
}

func TestNotify(t *testing.T) {
	var got atomic.Int64
	srv := goServer(t, func(req []byte) ([]byte, error) {
		if string(req) == "note" {
			got.Add(1)
		}
		return req, nil
	})
	c, err := Dial(addrOf(t, srv.Addrs(), "shm:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 10; i++ {
		if err := c.Notify([]byte("note")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "10 notifications", func() bool { return got.Load() == 10 })
}

// A slow handler: "slow" waits until released.
type slowServer struct {
	release chan struct{}
	entered chan struct{}
}

func newSlow(t *testing.T) (*slowServer, *Server) {
	s := &slowServer{release: make(chan struct{}), entered: make(chan struct{}, 16)}
	srv := goServer(t, func(req []byte) ([]byte, error) {
		if string(req) == "slow" {
			s.entered <- struct{}{}
			<-s.release
		}
		return req, nil
	})
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
	})
	return s, srv
}

func TestDeadlineIsTimeout(t *testing.T) {
	s, srv := newSlow(t)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(addrOf(t, srv.Addrs(), scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = c.Call(ctx, []byte("slow"))
			took := time.Since(start)
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
			}
			if took > 2*time.Second {
				t.Fatalf("the timeout took %v", took)
			}
			<-s.entered
			// Release the handler: its late response must be discarded,
			// never returned to the next call.
			s.release <- struct{}{}
			for i := 0; i < 3; i++ {
				req := fmt.Sprintf("after-%d", i)
				resp, err := c.Call(context.Background(), []byte(req))
				if err != nil || string(resp) != req {
					t.Fatalf("call after a timeout: %q, %v (want %q)", resp, err, req)
				}
			}
		})
	}
}

func TestContextDoneBeforeSend(t *testing.T) {
	var calls atomic.Int64
	srv := goServer(t, func(req []byte) ([]byte, error) { calls.Add(1); return req, nil })
	c, err := Dial(addrOf(t, srv.Addrs(), "shm:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Call(ctx, []byte("x")); err != context.Canceled {
		t.Fatalf("cancelled ctx: %v", err)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := c.Call(ctx, []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired ctx: %v", err)
	}
	if _, _, err := c.Recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired ctx, Recv: %v", err)
	}
	if resp, err := c.Call(context.Background(), []byte("y")); err != nil || string(resp) != "y" {
		t.Fatalf("%q, %v", resp, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1 (nothing sent for done contexts)", n)
	}
}

func TestRecvTimeoutKeepsCall(t *testing.T) {
	s, srv := newSlow(t)
	c, err := Dial(addrOf(t, srv.Addrs(), "shm:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Send([]byte("slow"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := c.Recv(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Recv: %v, want ErrTimeout", err)
	}
	<-s.entered
	s.release <- struct{}{}
	got, resp, err := c.Recv(context.Background())
	if err != nil || got != id || string(resp) != "slow" {
		t.Fatalf("Recv after a timed-out Recv: %d %q %v", got, resp, err)
	}
}

func TestClientErrors(t *testing.T) {
	dir := shortDir(t)
	if _, err := Dial("unix:"+filepath.Join(dir, "nobody.sock"), nil); !errors.Is(err, ErrConnect) {
		t.Fatalf("no server: %v", err)
	}
	if _, err := Dial("carrier-pigeon:x", nil); !errors.Is(err, ErrInvalidAddress) || !errors.Is(err, ErrConnect) {
		t.Fatalf("bad address: %v", err)
	}
	var e *Error
	_, err := Dial("shm:"+filepath.Join(dir, "nobody.sock"), nil)
	if !errors.As(err, &e) || e.Status != StatusConnect || e.Message == "" {
		t.Fatalf("no shm server: %#v", err)
	}

	srv := goServer(t, prefixHandler)
	c, err := Dial(addrOf(t, srv.Addrs(), "shm:"), &Options{MaxMessageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), make([]byte, 8192)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize request: %v", err)
	}
	if resp, err := c.Call(context.Background(), []byte("ok")); err != nil || string(resp) != "go:ok" {
		t.Fatalf("after an oversize request: %q %v", resp, err)
	}
	c.Close()
	c.Close()
	if _, err := c.Call(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed client: %v", err)
	}
	if _, err := c.Send([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed client, Send: %v", err)
	}
	if err := c.Notify([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed client, Notify: %v", err)
	}
	if _, err := Listen([]string{"tcp:256.0.0.1:1"}, nil); err == nil {
		t.Fatal("Listen on a bad address succeeded")
	}
}

func TestServerStateErrors(t *testing.T) {
	dir := shortDir(t)
	srv, err := Listen([]string{"unix:" + filepath.Join(dir, "s.sock")}, &ServerOptions{MaxSessions: 4, Wait: WaitSleep})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(prefixHandler) }()
	c, err := Dial(srv.Addrs()[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Call(context.Background(), []byte("a")); err != nil || string(resp) != "go:a" {
		t.Fatalf("%q %v", resp, err)
	}
	if err := srv.Serve(prefixHandler); !errors.Is(err, ErrState) {
		t.Fatalf("second Serve: %v", err)
	}
	srv.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Stop")
	}
	if _, err := c.Call(context.Background(), []byte("a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after the server stopped: %v", err)
	}
	c.Close()
	srv.Close()
	if err := srv.Serve(prefixHandler); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

func TestManyGoroutinesOneClient(t *testing.T) {
	srv := goServer(t, prefixHandler)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(addrOf(t, srv.Addrs(), scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const goroutines, calls = 16, 300
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < calls; i++ {
						req := fmt.Sprintf("g%d-%d", g, i)
						resp, err := c.Call(context.Background(), []byte(req))
						if err != nil || string(resp) != "go:"+req {
							errs <- fmt.Errorf("goroutine %d call %d: %q, %v", g, i, resp, err)
							return
						}
					}
				}(g)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

func TestManyClientsParallel(t *testing.T) {
	var calls atomic.Int64
	srv := goServer(t, func(req []byte) ([]byte, error) { calls.Add(1); return req, nil })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			c, err := Dial(addrOf(t, srv.Addrs(), schemes[g%3]), nil)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for i := 0; i < 200; i++ {
				req := []byte(fmt.Sprintf("c%d-%d", g, i))
				if resp, err := c.Call(context.Background(), req); err != nil || !bytes.Equal(resp, req) {
					errs <- fmt.Errorf("%q %v", resp, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if calls.Load() != 1600 {
		t.Fatalf("handler ran %d times, want 1600", calls.Load())
	}
}

// The server process is killed with SIGKILL during a call: the call fails
// with ErrClosed (ErrPeerGone) quickly, it does not hang.
func TestServerKilledMidCall(t *testing.T) {
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			dir := shortDir(t)
			ready := filepath.Join(dir, "ready")
			entered := filepath.Join(dir, "entered")
			addrs := map[string]string{
				"shm:":  "shm:" + filepath.Join(dir, "k.sock"),
				"unix:": "unix:" + filepath.Join(dir, "k.sock"),
				"tcp:":  "tcp:127.0.0.1:0",
			}
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			p := startProc(t, ready, []string{
				"SHMLINK_GO_HELPER=serve",
				"SHMLINK_GO_ADDRS=" + addrs[scheme],
				"SHMLINK_GO_READY=" + ready,
				"SHMLINK_GO_ENTERED=" + entered,
			}, exe, "-test.run=^$")
			c, err := Dial(p.addrs[0], &Options{Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if resp, err := c.Call(context.Background(), []byte("hi")); err != nil || string(resp) != "hi" {
				t.Fatalf("%q %v", resp, err)
			}
			type result struct {
				err  error
				when time.Time
			}
			res := make(chan result, 1)
			go func() {
				_, err := c.Call(context.Background(), []byte("hang"))
				res <- result{err, time.Now()}
			}()
			// Kill the server once the call is in its handler.
			waitFor(t, 10*time.Second, "the call to reach the handler", func() bool {
				_, err := os.Stat(entered)
				return err == nil
			})
			killed := time.Now()
			p.cmd.Process.Signal(syscall.SIGKILL)
			select {
			case r := <-res:
				if !errors.Is(r.err, ErrClosed) {
					t.Fatalf("call to a killed server: %v, want ErrClosed", r.err)
				}
				t.Logf("%s: failed %v after SIGKILL: %v", scheme, r.when.Sub(killed), r.err)
				if d := r.when.Sub(killed); d > 100*time.Millisecond {
					t.Fatalf("noticed only after %v", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the call hangs after the server was killed")
			}
			if _, err := c.Call(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
				t.Fatalf("next call: %v", err)
			}
		})
	}
}

// A context cancelled while its call waits (no deadline): Call returns
// ctx.Err() promptly; the late response is dropped, never returned to a
// later Call or Recv; pipelined calls around it keep their responses.
func TestCancelMidCall(t *testing.T) {
	s, srv := newSlow(t)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(addrOf(t, srv.Addrs(), scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			before, err := c.Send([]byte("before"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			type result struct {
				resp []byte
				err  error
				at   time.Time
			}
			res := make(chan result, 1)
			go func() {
				resp, err := c.Call(ctx, []byte("slow"))
				res <- result{resp, err, time.Now()}
			}()
			<-s.entered
			cancelled := time.Now()
			cancel()
			var r result
			select {
			case r = <-res:
			case <-time.After(5 * time.Second):
				t.Fatal("Call did not return after its context was cancelled")
			}
			if r.err != context.Canceled {
				t.Fatalf("cancelled Call: %q, %v", r.resp, r.err)
			}
			if d := r.at.Sub(cancelled); d > 500*time.Millisecond {
				t.Fatalf("cancellation noticed after %v", d)
			}
			// The pipelined call sent before is still there for Recv.
			id, resp, err := c.Recv(context.Background())
			if err != nil || id != before || string(resp) != "before" {
				t.Fatalf("Recv after a cancelled Call: %d %q %v", id, resp, err)
			}
			if n := c.InFlight(); n != 0 {
				t.Fatalf("InFlight = %d after the cancelled call, want 0", n)
			}
			if _, _, err := c.Recv(context.Background()); !errors.Is(err, ErrNothingInFlight) {
				t.Fatalf("Recv with only an abandoned call in flight: %v", err)
			}
			// Let the slow call finish: its response must never surface.
			s.release <- struct{}{}
			after, err := c.Send([]byte("after"))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				req := fmt.Sprintf("next-%d", i)
				resp, err := c.Call(context.Background(), []byte(req))
				if err != nil || string(resp) != req {
					t.Fatalf("Call after the cancelled one: %q, %v (want %q)", resp, err, req)
				}
				ctx, cancel := context.WithCancel(context.Background())
				resp, err = c.Call(ctx, []byte(req+"c"))
				cancel()
				if err != nil || string(resp) != req+"c" {
					t.Fatalf("cancellable Call after the cancelled one: %q, %v", resp, err)
				}
			}
			id, resp, err = c.Recv(context.Background())
			if err != nil || id != after || string(resp) != "after" {
				t.Fatalf("Recv: %d %q %v, want the call 'after'", id, resp, err)
			}
			if _, _, err := c.Recv(context.Background()); !errors.Is(err, ErrNothingInFlight) {
				t.Fatalf("Recv at the end: %v", err)
			}
		})
	}
}

// Recv with a cancellable context: cancelling it returns ctx.Err() and
// leaves the call in flight.
func TestCancelRecv(t *testing.T) {
	s, srv := newSlow(t)
	c, err := Dial(addrOf(t, srv.Addrs(), "unix:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Send([]byte("slow"))
	if err != nil {
		t.Fatal(err)
	}
	<-s.entered
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, err := c.Recv(ctx); done <- err }()
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("cancelled Recv: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv did not return after cancel")
	}
	s.release <- struct{}{}
	got, resp, err := c.Recv(context.Background())
	if err != nil || got != id || string(resp) != "slow" {
		t.Fatalf("%d %q %v", got, resp, err)
	}
}

// Abandoned calls' responses do not pile up in a client that never calls
// Recv: the library drops them as they arrive.
func TestAbandonedDrained(t *testing.T) {
	s, srv := newSlow(t)
	c, err := Dial(addrOf(t, srv.Addrs(), "shm:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := c.Call(ctx, []byte("slow")); done <- err }()
		<-s.entered
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("cancelled call: %v", err)
		}
		s.release <- struct{}{}
	}
	// The library dropped the abandoned calls' answers as they came: the
	// next calls get their own, nothing is left in flight or queued.
	for i := 0; i < 3; i++ {
		req := fmt.Sprintf("z%d", i)
		if resp, err := c.Call(context.Background(), []byte(req)); err != nil || string(resp) != req {
			t.Fatalf("%q %v", resp, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := cInFlight(c); n != 0 || len(c.pending) != 0 || len(c.waits) != 0 || c.sent != 0 {
		t.Fatalf("after the abandoned calls: %d in flight in the library, %d pending, %d waiting, %d sent",
			n, len(c.pending), len(c.waits), c.sent)
	}
}

// Responses larger than the client accepts, or than the server may send,
// are remote errors; the session goes on.
func TestOversizeResponses(t *testing.T) {
	big := func(req []byte) ([]byte, error) {
		n := 0
		fmt.Sscan(string(req), &n)
		return make([]byte, n), nil
	}
	srv := goServer(t, big)
	c, err := Dial(addrOf(t, srv.Addrs(), "shm:"), &Options{MaxMessageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Call(context.Background(), []byte("100000"))
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeResponseTooLarge {
		t.Fatalf("response over the client's limit: %v", err)
	}
	if resp, err := c.Call(context.Background(), []byte("10")); err != nil || len(resp) != 10 {
		t.Fatalf("after it: %d B, %v", len(resp), err)
	}

}

// A response over the server's own max_message_size is a remote error too
// (CodeResponseTooLarge) and the session goes on. (The core used to end the
// session there: found by this test, fixed in callee::reply.)
func TestOversizeResponseServerLimit(t *testing.T) {
	big := func(req []byte) ([]byte, error) {
		n := 0
		fmt.Sscan(string(req), &n)
		return make([]byte, n), nil
	}
	var re *RemoteError
	dir := shortDir(t)
	small, err := Listen([]string{"unix:" + filepath.Join(dir, "s.sock")}, &ServerOptions{MaxMessageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	go small.Serve(big)
	defer small.Close()
	c2, err := Dial(small.Addrs()[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.Call(context.Background(), []byte("100000"))
	if !errors.As(err, &re) {
		t.Fatalf("response over the server's limit: %v", err)
	}
	if resp, err := c2.Call(context.Background(), []byte("10")); err != nil || len(resp) != 10 {
		t.Fatalf("after it: %d B, %v", len(resp), err)
	}
}

func TestServerOptionsAndCloseWithoutServe(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "o.sock")
	srv, err := Listen([]string{"unix:" + sock}, &ServerOptions{
		AllowedUIDs: []uint32{12345, 12346}, AllowedGIDs: []uint32{54321},
		SocketMode: 0o640, MaxSessions: 2, Wait: WaitBusy,
		HandshakeTimeout: time.Second, SendTimeout: time.Second, MaxMessageSize: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("socket mode %v, want 0640", fi.Mode().Perm())
	}
	srv.Close()
	srv.Close()
	if err := srv.Serve(prefixHandler); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	if _, err := Listen([]string{"unix:" + sock}, &ServerOptions{Wait: 99}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad wait strategy: %v", err)
	}
	if _, err := Listen(nil, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no address: %v", err)
	}
	if _, err := Dial("unix:"+sock, &Options{RingSize: 1000}); !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrConnect) {
		t.Fatalf("bad ring size: %v", err)
	}
}

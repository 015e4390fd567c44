package shmlink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests of calls that wait without holding the client (cancellable
// contexts and deadlines), against a Go server in a process of its own
// (the test binary re-executed, helperServe): "hold" calls wait in their
// handler until the test releases them through a control session.

// promptly bounds the time from cancel() to the cancelled Call's return.
// The wait is woken by Go's poller at once (measured: tens of µs); the
// bound leaves room for a loaded CI machine and -race, and is far below
// what waiting in slices would show on the wake-up count (checked apart).
const promptly = 20 * time.Millisecond

// heldServer starts the helper server on shm, unix and tcp, and a control
// client on its own session.
func heldServer(t *testing.T) (*proc, *Client) {
	t.Helper()
	dir := shortDir(t)
	ready := filepath.Join(dir, "ready")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := startProc(t, ready, []string{
		"SHMLINK_GO_HELPER=serve",
		"SHMLINK_GO_ADDRS=shm:" + filepath.Join(dir, "h.sock") + " unix:" + filepath.Join(dir, "u.sock") + " tcp:127.0.0.1:0",
		"SHMLINK_GO_READY=" + ready,
		"SHMLINK_GO_ENTERED=" + filepath.Join(dir, "entered"),
	}, exe, "-test.run=^$")
	ctl, err := Dial(p.addr(t, "unix:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	return p, ctl
}

// control makes a control call ("held?N", "release:N") and checks its "ok".
func control(t *testing.T, ctl *Client, req string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := ctl.Call(ctx, []byte(req)); err != nil || string(resp) != "ok" {
		t.Fatalf("control %q: %q, %v", req, resp, err)
	}
}

func wakes(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wakes
}

type callResult struct {
	resp []byte
	err  error
	at   time.Time
}

// callAsync runs c.Call(ctx, req) on a goroutine of its own.
func callAsync(c *Client, ctx context.Context, req string) <-chan callResult {
	res := make(chan callResult, 1)
	go func() {
		resp, err := c.Call(ctx, []byte(req))
		res <- callResult{resp, err, time.Now()}
	}()
	return res
}

func within(t *testing.T, res <-chan callResult, d time.Duration, what string) callResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no return within %v", what, d)
	}
	return callResult{}
}

// usable checks that c's next calls (cancellable and not) get their own
// answers and that nothing is left over: the abandoned call's answer was
// dropped, never returned.
func usable(t *testing.T, c *Client, tag string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		req := fmt.Sprintf("%s-%d", tag, i)
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := c.Call(ctx, []byte(req))
		cancel()
		if err != nil || string(resp) != req {
			t.Fatalf("cancellable call after: %q, %v (want %q)", resp, err, req)
		}
		if resp, err := c.Call(context.Background(), []byte(req+"b")); err != nil || string(resp) != req+"b" {
			t.Fatalf("call after: %q, %v (want %q)", resp, err, req+"b")
		}
	}
	if _, _, err := c.Recv(context.Background()); !errors.Is(err, ErrNothingInFlight) {
		t.Fatalf("Recv after: %v, want ErrNothingInFlight", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := cInFlight(c); n != 0 || c.sent != 0 || len(c.pending) != 0 || len(c.waits) != 0 || c.watcher != nil {
		t.Fatalf("left over: %d in flight in the library, %d sent, %d pending, %d waiting, watcher %v",
			n, c.sent, len(c.pending), len(c.waits), c.watcher != nil)
	}
}

// A call cancelled while the server holds its answer returns
// context.Canceled at once (woken by Go's poller, not found by a poll:
// the wait woke at most a few times); the session stays usable, the next
// calls get their own answers (the abandoned one, released, is dropped).
func TestCancelWhileServerHolds(t *testing.T) {
	p, ctl := heldServer(t)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(p.addr(t, scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			w0 := wakes(c)
			ctx, cancel := context.WithCancel(context.Background())
			res := callAsync(c, ctx, "hold")
			control(t, ctl, "held?1")
			cancelled := time.Now()
			cancel()
			r := within(t, res, 5*time.Second, "cancelled call")
			if r.err != context.Canceled {
				t.Fatalf("cancelled call: %q, %v", r.resp, r.err)
			}
			d := r.at.Sub(cancelled)
			w := wakes(c) - w0
			t.Logf("%s: returned %v after cancel; the wait woke %d time(s)", scheme, d, w)
			if d > promptly {
				t.Fatalf("returned %v after cancel (bound %v)", d, promptly)
			}
			if w > 3 {
				t.Fatalf("the wait woke %d times: polling?", w)
			}
			control(t, ctl, "release:1")
			usable(t, c, "after-cancel")
		})
	}
}

// A deadline passing while the server holds the answer: ErrTimeout and
// context.DeadlineExceeded right at the deadline, from a wait that did not
// poll (a 2 ms slice loop would wake ~50 times in 100 ms).
func TestDeadlineWhileServerHolds(t *testing.T) {
	p, ctl := heldServer(t)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(p.addr(t, scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const limit = 100 * time.Millisecond
			w0 := wakes(c)
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			start := time.Now()
			_, err = c.Call(ctx, []byte("hold"))
			took := time.Since(start)
			w := wakes(c) - w0
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
			}
			t.Logf("%s: %v for a %v deadline; the wait woke %d time(s)", scheme, took, limit, w)
			if took < limit || took > limit+promptly {
				t.Fatalf("returned after %v for a deadline of %v", took, limit)
			}
			if w > 3 {
				t.Fatalf("the wait woke %d times: polling?", w)
			}
			control(t, ctl, "release:1")
			usable(t, c, "after-deadline")
		})
	}
}

// The server process killed with SIGKILL while calls with contexts wait
// (one in the handler, the others queued behind it): every one fails with
// ErrClosed at once, and so do later calls.
func TestServerKilledDuringWaitingCalls(t *testing.T) {
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			p, ctl := heldServer(t)
			c, err := Dial(p.addr(t, scheme), &Options{Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const n = 8
			var results []<-chan callResult
			for i := 0; i < n; i++ {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if i%2 == 1 {
					ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
				}
				results = append(results, callAsync(c, ctx, "hold"))
			}
			control(t, ctl, "held?1")
			killed := time.Now()
			p.cmd.Process.Signal(syscall.SIGKILL)
			var last time.Duration
			for i, res := range results {
				r := within(t, res, 10*time.Second, "a call to the killed server")
				if !errors.Is(r.err, ErrClosed) {
					t.Fatalf("call %d to the killed server: %q, %v (want ErrClosed)", i, r.resp, r.err)
				}
				last = max(last, r.at.Sub(killed))
			}
			t.Logf("%s: %d calls failed within %v of SIGKILL", scheme, n, last)
			if last > 100*time.Millisecond {
				t.Fatalf("noticed only after %v", last)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if _, err := c.Call(ctx, []byte("x")); !errors.Is(err, ErrClosed) {
				t.Fatalf("next call: %v", err)
			}
		})
	}
}

// 10,000 goroutines (1,000 under the race detector) call at once on one
// client, each with a context (a
// deadline, or cancellable; every 10th cancelled while in flight, every 7th
// without a context), beside a goroutine pipelining with Send/Recv: every
// call gets its own answer (or context.Canceled), nothing is left over.
func TestManyConcurrentCallsWithContexts(t *testing.T) {
	p, _ := heldServer(t)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(p.addr(t, scheme), &Options{Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const goroutines = manyGoroutines
			var wg sync.WaitGroup
			errs := make(chan error, goroutines+1)
			var cancelledN, answered sync.Map
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					req := fmt.Sprintf("g%04d-", g) + strings.Repeat("x", g%200)
					var ctx context.Context
					var cancel context.CancelFunc
					switch {
					case g%10 == 0:
						ctx, cancel = context.WithCancel(context.Background())
						go cancel() // while in flight, or before it is sent
					case g%7 == 0:
						ctx, cancel = context.Background(), func() {}
					case g%2 == 0:
						ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
					default:
						ctx, cancel = context.WithCancel(context.Background())
					}
					defer cancel()
					resp, err := c.Call(ctx, []byte(req))
					if g%10 == 0 && err == context.Canceled {
						cancelledN.Store(g, true)
						return
					}
					if err != nil || string(resp) != req {
						errs <- fmt.Errorf("goroutine %d: %q, %v (want %q)", g, resp, err, req)
						return
					}
					answered.Store(g, true)
				}(g)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sent := map[CallID]string{}
				for i := 0; i < 20; i++ {
					req := fmt.Sprintf("pipelined-%d", i)
					id, err := c.Send([]byte(req))
					if err != nil {
						errs <- err
						return
					}
					sent[id] = req
				}
				for i := 0; i < 20; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					id, resp, err := c.Recv(ctx)
					cancel()
					if err != nil || sent[id] != string(resp) {
						errs <- fmt.Errorf("Recv %d: id %d %q, %v", i, id, resp, err)
						return
					}
					delete(sent, id)
				}
			}()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			n := 0
			cancelledN.Range(func(any, any) bool { n++; return true })
			t.Logf("%s: %d calls answered, %d cancelled", scheme, goroutines-n, n)
			usable(t, c, "after-many")
		})
	}
}

// Many calls waiting on one client, all cancelled: each returns at once,
// no goroutine is left behind once they are done, the client goes on.
func TestCancelledWaitersLeaveNoGoroutines(t *testing.T) {
	p, ctl := heldServer(t)
	c, err := Dial(p.addr(t, "shm:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	usable(t, c, "warm") // the descriptor is made, the poller's goroutines started
	base := runtime.NumGoroutine()
	const n = 50
	ctx, cancel := context.WithCancel(context.Background())
	var results []<-chan callResult
	for i := 0; i < n; i++ {
		results = append(results, callAsync(c, ctx, "hold"))
	}
	control(t, ctl, "held?1") // one held in the handler, the others queued behind it
	cancelled := time.Now()
	cancel()
	var last time.Duration
	for _, res := range results {
		r := within(t, res, 5*time.Second, "a cancelled call")
		if r.err != context.Canceled {
			t.Fatalf("cancelled call: %q, %v", r.resp, r.err)
		}
		last = max(last, r.at.Sub(cancelled))
	}
	t.Logf("%d waiting calls cancelled: the last returned %v after cancel", n, last)
	if last > 5*promptly {
		t.Fatalf("the last cancelled call returned after %v", last)
	}
	control(t, ctl, fmt.Sprintf("release:%d", n))
	usable(t, c, "after")
	waitFor(t, 5*time.Second, fmt.Sprintf("goroutines back to %d", base), func() bool {
		return runtime.NumGoroutine() <= base
	})
}

// Close while calls wait: they end with ErrClosed at once.
func TestCloseWhileCallsWait(t *testing.T) {
	p, ctl := heldServer(t)
	c, err := Dial(p.addr(t, "shm:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var results []<-chan callResult
	for i := 0; i < 4; i++ {
		results = append(results, callAsync(c, ctx, "hold"))
	}
	control(t, ctl, "held?1")
	closed := time.Now()
	c.Close()
	for _, res := range results {
		r := within(t, res, 5*time.Second, "a call of a closed client")
		if !errors.Is(r.err, ErrClosed) {
			t.Fatalf("call of a closed client: %q, %v", r.resp, r.err)
		}
		if d := r.at.Sub(closed); d > promptly {
			t.Fatalf("returned %v after Close", d)
		}
	}
	control(t, ctl, "release:4")
}

// A session whose server cannot ring the client's descriptor (a server of
// an older build; forced here) waits in 2 ms slices: the same results,
// cancellation noticed within a slice. The wake-up count tells the two
// kinds of wait apart.
func TestSlicedWaitFallback(t *testing.T) {
	p, ctl := heldServer(t)
	c, err := Dial(p.addr(t, "shm:"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.mu.Lock()
	c.sliced = true
	c.mu.Unlock()
	w0 := wakes(c)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Call(ctx, []byte("hold")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
	if w := wakes(c) - w0; w < 10 {
		t.Fatalf("sliced wait woke %d times in 100 ms, want tens", w)
	}
	control(t, ctl, "release:1")
	ctx2, cancel2 := context.WithCancel(context.Background())
	res := callAsync(c, ctx2, "hold")
	control(t, ctl, "held?1")
	cancelled := time.Now()
	cancel2()
	if r := within(t, res, 5*time.Second, "cancelled call"); r.err != context.Canceled || r.at.Sub(cancelled) > sliceWait+promptly {
		t.Fatalf("cancelled call: %v after %v", r.err, r.at.Sub(cancelled))
	}
	control(t, ctl, "release:1")
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := 0; g < 100; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := []byte(fmt.Sprintf("s%d", g))
			if resp, err := c.Call(ctx, req); err != nil || !bytes.Equal(resp, req) {
				errs <- fmt.Errorf("%q %v", resp, err)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	usable(t, c, "sliced")
}

// Large requests and answers (streamed through the 64 KiB rings in many
// chunks) with contexts: alone on the client (an answer that may still be
// arriving when the first wait ends) and several at once.
func TestLargeCallsWithContexts(t *testing.T) {
	p, _ := heldServer(t)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(p.addr(t, scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sizes := []int{0, 1, 64, 65536, 200000, 1 << 20, 4 << 20}
			for i, n := range sizes {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				req := pattern(n, byte(i))
				resp, err := c.Call(ctx, req)
				cancel()
				if err != nil || !bytes.Equal(resp, req) {
					t.Fatalf("%d B alone: %d B back, %v", n, len(resp), err)
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, len(sizes))
			for i, n := range sizes {
				wg.Add(1)
				go func(i, n int) {
					defer wg.Done()
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					req := pattern(n, byte(i+7))
					if resp, err := c.Call(ctx, req); err != nil || !bytes.Equal(resp, req) {
						errs <- fmt.Errorf("%d B among others: %d B back, %v", n, len(resp), err)
					}
				}(i, n)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			usable(t, c, "after-large")
		})
	}
}

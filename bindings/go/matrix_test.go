package shmlink

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkWaitMatrix is the wait-strategy matrix of this binding: a sync
// ping-pong over shm at 64 B and 2 KiB with each strategy (sleep, spin with
// Spin 0 = the adaptive library default, busy), the Rust echo server
// (`shmlink echo --reply-ratio 1`, every response as long as its request)
// waiting with the same strategy as the client, as `shmlink bench` pairs
// them. One server and one session per strategy; the (strategy, size)
// pingers run in interleaved rounds of 500 calls after 1,000 warm-up calls
// each, so the drifting load of a shared machine weighs on all alike.
//
// The servers not in their round are stopped (SIGSTOP, then SIGCONT for
// their round): a busy server's session spins between requests, and left
// running it would take a CPU from the other strategies' rounds, which a
// separate run per strategy (as `shmlink bench` does) does not. A server is
// stopped only once its session has settled into its wait (after the spin
// bound of the default, 400 µs at most): one stopped in a spin's yield
// would take the stop for a contended CPU and wait as sleep does for a
// while.
//
// Reports <strategy>-<size>-p50-ns per pinger and prints one line per size
// with the default's p50 ÷ the best strategy's (bindings/go/bench.sh runs
// it quiet and beside a CPU hog). With SHMLINK_HOG_PID set (the hog's pid)
// it also reports <strategy>-<size>-hog-pct: how much of one CPU the hog
// got while that pinger's timed calls ran, which tells where the scheduler
// put the client and the server (one CPU between them: the hog keeps the
// other, ~100 %; spread: the hog shares one, ~50-67 %).
// Run: go test -bench WaitMatrix -run '^$'
func BenchmarkWaitMatrix(b *testing.B) {
	sizes := []int{64, 2048}
	strategies := []struct {
		name string
		wait WaitStrategy
	}{{"sleep", WaitSleep}, {"spin", WaitSpin}, {"busy", WaitBusy}}
	const defaultName = "spin" // WaitSpin with Spin 0: the adaptive default
	ctx := context.Background()

	type group struct {
		srv *proc
		ps  []*pinger
	}
	var groups []*group
	for _, s := range strategies {
		echo := rustEcho(b, "--reply-ratio", "1", "--wait", s.name)
		c, err := Dial(echo.addr(b, "shm:"), &Options{Wait: s.wait})
		if err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
		defer c.Close()
		g := &group{srv: echo}
		for _, size := range sizes {
			req := pattern(size, byte(size/64))
			buf := make([]byte, 0, size)
			g.ps = append(g.ps, &pinger{name: fmt.Sprintf("%s-%d", s.name, size), call: func() error {
				var err error
				buf, err = c.CallAppend(ctx, buf[:0], req)
				if err == nil && len(buf) != size {
					err = fmt.Errorf("%d B back, %d B sent", len(buf), size)
				}
				return err
			}})
		}
		groups = append(groups, g)
	}
	signal := func(g *group, sig syscall.Signal) {
		if err := g.srv.cmd.Process.Signal(sig); err != nil {
			b.Fatalf("%v to the echo server: %v", sig, err)
		}
	}
	// Registered after the clients' Close: runs before them, and before the
	// servers' cleanup (a stopped server would not see its SIGTERM).
	defer func() {
		for _, g := range groups {
			g.srv.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	// settle is longer than any spin of a server between two requests.
	const settle = 2 * time.Millisecond
	time.Sleep(settle)
	for _, g := range groups {
		signal(g, syscall.SIGSTOP)
	}
	hog := hogClock(b)
	// run makes n calls with each pinger of g, its server running.
	run := func(g *group, n int, timed bool) {
		signal(g, syscall.SIGCONT)
		for _, p := range g.ps {
			wall, cpu := time.Now(), hog()
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if err := p.call(); err != nil {
					b.Fatalf("%s: %v", p.name, err)
				}
				if timed {
					p.lat = append(p.lat, time.Since(t0))
				}
			}
			if timed {
				p.wall += time.Since(wall)
				p.hog += hog() - cpu
			}
		}
		time.Sleep(settle)
		signal(g, syscall.SIGSTOP)
	}

	for _, g := range groups {
		run(g, 1000, false) // warm-up: caches, spin calibration, the server's threads
		for _, p := range g.ps {
			p.lat = make([]time.Duration, 0, b.N)
		}
	}
	b.ResetTimer()
	const round = 500
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		for _, g := range groups {
			run(g, n, true)
		}
	}
	b.StopTimer()

	p50 := map[string]time.Duration{}
	for _, g := range groups {
		for _, p := range g.ps {
			sort.Slice(p.lat, func(i, j int) bool { return p.lat[i] < p.lat[j] })
			p50[p.name] = p.lat[len(p.lat)/2]
			b.ReportMetric(float64(p50[p.name].Nanoseconds()), p.name+"-p50-ns")
			if p.wall > 0 && os.Getenv("SHMLINK_HOG_PID") != "" {
				b.ReportMetric(100*float64(p.hog)/float64(p.wall), p.name+"-hog-pct")
			}
		}
	}
	if b.N < 1000 {
		return // the calibration run
	}
	fmt.Println()
	for _, size := range sizes {
		line := fmt.Sprintf("matrix size=%d", size)
		best := ""
		for _, s := range strategies {
			v := p50[fmt.Sprintf("%s-%d", s.name, size)]
			line += fmt.Sprintf(" %s=%dns", s.name, v.Nanoseconds())
			if best == "" || v < p50[fmt.Sprintf("%s-%d", best, size)] {
				best = s.name
			}
		}
		d, bv := p50[fmt.Sprintf("%s-%d", defaultName, size)], p50[fmt.Sprintf("%s-%d", best, size)]
		fmt.Printf("%s best=%s default/best=%.2f\n", line, best, float64(d)/float64(bv))
	}
}

// hogClock returns a reader of the CPU time the hog named by
// SHMLINK_HOG_PID has had so far (its one thread's schedstat, in ns), or a
// reader of zero when no hog is named.
func hogClock(b *testing.B) func() time.Duration {
	pid := os.Getenv("SHMLINK_HOG_PID")
	if pid == "" {
		return func() time.Duration { return 0 }
	}
	path := "/proc/" + pid + "/schedstat"
	return func() time.Duration {
		raw, err := os.ReadFile(path)
		if err != nil {
			b.Fatalf("the hog's CPU time: %v", err)
		}
		fields := strings.Fields(string(raw))
		if len(fields) == 0 {
			b.Fatalf("the hog's CPU time: %s is empty", path)
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			b.Fatalf("the hog's CPU time: %s: %v", path, err)
		}
		return time.Duration(ns)
	}
}

package shmlink

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// The benchmark: a 64 B synchronous ping-pong (a call, its 64 B answer, the
// next call) from this process to a server in another process:
//
//   - shmlink over shm: this package's client against the Rust echo server
//     (`shmlink echo --reply-ratio 1`; the client spins up to 50 µs, the
//     server with its default wait);
//   - shmlink over unix: the same server, for scale;
//   - Go's net.UnixConn against a minimal Go echo server (the test binary
//     re-executed) with 4-byte length framing: what a Go program would
//     write without shmlink;
//   - shmlink over shm with a cancellable context (a request's), on a
//     client that waits up to 50 µs in C first (the default) and on one
//     that parks on Go's poller at once.
//
// in interleaved rounds (BenchmarkPingPong64), p50 from each call timed
// with time.Now, calls/s, one line with the ratios.
// Run: go test -bench PingPong -run '^$'
//
// BenchmarkCgoCrossing measures one cgo call into the library that does no
// work: the price of a crossing (Call crosses once: the C call sends and waits).

func BenchmarkCgoCrossing(b *testing.B) {
	for i := 0; i < b.N; i++ {
		crossing()
	}
}

// helperRawEcho serves SHMLINK_GO_ADDRS (a unix socket path) with 4-byte
// little-endian length framing, echoing each message.
func helperRawEcho() int {
	path := os.Getenv("SHMLINK_GO_ADDRS")
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready := os.Getenv("SHMLINK_GO_READY")
	os.WriteFile(ready+".tmp", []byte("raw:"+path+"\n"), 0o600)
	os.Rename(ready+".tmp", ready)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return 0
		}
		go func(conn net.Conn) {
			defer conn.Close()
			buf := make([]byte, 4+1<<16)
			for {
				if _, err := io.ReadFull(conn, buf[:4]); err != nil {
					return
				}
				n := binary.LittleEndian.Uint32(buf[:4])
				if int(n) > len(buf)-4 {
					return
				}
				if _, err := io.ReadFull(conn, buf[4:4+n]); err != nil {
					return
				}
				if _, err := conn.Write(buf[:4+n]); err != nil {
					return
				}
			}
		}(conn)
	}
}

// rawCall is one framed round trip on a unix connection.
func rawCall(conn net.Conn, out, in []byte, req []byte) ([]byte, error) {
	binary.LittleEndian.PutUint32(out[:4], uint32(len(req)))
	copy(out[4:], req)
	if _, err := conn.Write(out[:4+len(req)]); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(conn, in[:4]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(in[:4])
	if _, err := io.ReadFull(conn, in[4:4+n]); err != nil {
		return nil, err
	}
	return in[4 : 4+n], nil
}

type pingResult struct {
	p50    time.Duration
	perSec float64
}

// measure runs call b.N times, timing each, and reports p50 and calls/s.
func measure(b *testing.B, call func() error) pingResult {
	for i := 0; i < 1000; i++ { // warm up: caches, spin calibration, the server's threads
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	total := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := pingResult{p50: lat[len(lat)/2], perSec: float64(b.N) / total.Seconds()}
	b.ReportMetric(float64(r.p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(r.perSec, "calls/s")
	return r
}

// pinger is one transport of the interleaved ping-pong.
type pinger struct {
	name  string
	call  func() error
	lat   []time.Duration
	spent time.Duration
	// wall and hog: the time of the timed calls, and the CPU a hog had
	// in it (BenchmarkWaitMatrix beside a hog).
	wall, hog time.Duration
}

// BenchmarkPingPong64 measures the transports in interleaved rounds of 500
// calls (b.N calls each in all), so that the load of a shared machine,
// which drifts, weighs on all of them alike and the ratios hold within one
// run. Each transport's p50 and calls/s are reported as metrics and in one
// line with the ratios; ns/op is the whole round robin's.
func BenchmarkPingPong64(b *testing.B) {
	const size = 64
	req := pattern(size, 1)
	echo := rustEcho(b, "--reply-ratio", "1")
	// A request's context: cancellable, no deadline (one for all calls).
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()

	var ps []*pinger
	for _, v := range []struct {
		name, scheme string
		wait         WaitStrategy
		ctx          context.Context
		parked       bool
	}{
		{"shmlink-shm", "shm:", WaitSpin, context.Background(), false},
		// The client sleeping on the futex at once: slower when both sides
		// have a CPU, more robust when the machine is loaded (a spinning
		// client holds the CPU the server would need).
		{"shmlink-shm-sleep", "shm:", WaitSleep, context.Background(), false},
		{"shmlink-unix", "unix:", WaitSpin, context.Background(), false},
		// The same call with a cancellable context: sent and its answer
		// tried for up to 50 µs in one crossing, else parked on Go's
		// poller; and on a client that parks at once (what an answer
		// slower than 50 µs costs to be woken for).
		{"shmlink-shm-ctx", "shm:", WaitSpin, cancellable, false},
		{"shmlink-shm-ctx-parked", "shm:", WaitSpin, cancellable, true},
	} {
		c, err := Dial(echo.addr(b, v.scheme), &Options{Wait: v.wait})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if v.parked {
			c.spinWait = 0
		}
		ctx := v.ctx
		buf := make([]byte, 0, size)
		ps = append(ps, &pinger{name: v.name, call: func() error {
			var err error
			buf, err = c.CallAppend(ctx, buf[:0], req)
			if err == nil && len(buf) != size {
				err = fmt.Errorf("%d B back", len(buf))
			}
			return err
		}})
	}

	dir := shortDir(b)
	ready := filepath.Join(dir, "ready")
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "raw.sock")
	startProc(b, ready, []string{"SHMLINK_GO_HELPER=rawecho", "SHMLINK_GO_ADDRS=" + sock,
		"SHMLINK_GO_READY=" + ready}, exe, "-test.run=^$")
	conn, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	out, in := make([]byte, 4+size), make([]byte, 4+size)
	ps = append(ps, &pinger{name: "go-unixconn", call: func() error {
		resp, err := rawCall(conn, out, in, req)
		if err == nil && len(resp) != size {
			err = fmt.Errorf("%d B back", len(resp))
		}
		return err
	}})

	for _, p := range ps {
		for i := 0; i < 1000; i++ { // warm-up
			if err := p.call(); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
		}
		p.lat = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	const round = 500
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		for _, p := range ps {
			start := time.Now()
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if err := p.call(); err != nil {
					b.Fatalf("%s: %v", p.name, err)
				}
				p.lat = append(p.lat, time.Since(t0))
			}
			p.spent += time.Since(start)
		}
	}
	b.StopTimer()
	res := map[string]pingResult{}
	for _, p := range ps {
		sort.Slice(p.lat, func(i, j int) bool { return p.lat[i] < p.lat[j] })
		r := pingResult{p50: p.lat[len(p.lat)/2], perSec: float64(len(p.lat)) / p.spent.Seconds()}
		res[p.name] = r
		b.ReportMetric(float64(r.p50.Nanoseconds()), p.name+"-p50-ns")
		b.ReportMetric(r.perSec, p.name+"-calls/s")
	}
	if b.N < 10000 {
		return // the calibration runs
	}
	// The Rust client against the same server right after (not interleaved:
	// another process): what the binding adds to a call.
	rust := rustClientP50(b, echo.addr(b, "shm:"))
	shm, sleep, unix, raw := res["shmlink-shm"], res["shmlink-shm-sleep"], res["shmlink-unix"], res["go-unixconn"]
	fmt.Printf("\n64 B ping-pong, %d calls each, interleaved: shmlink shm (spin) p50 %v (%.0f calls/s), shm (sleep) p50 %v (%.0f calls/s), "+
		"shmlink unix p50 %v (%.0f calls/s), Go net.UnixConn p50 %v (%.0f calls/s): UnixConn p50 / shm p50 = %.1fx (sleep: %.1fx), "+
		"shm calls/s / UnixConn calls/s = %.1fx (sleep: %.1fx)",
		b.N, shm.p50, shm.perSec, sleep.p50, sleep.perSec, unix.p50, unix.perSec, raw.p50, raw.perSec,
		float64(raw.p50)/float64(shm.p50), float64(raw.p50)/float64(sleep.p50), shm.perSec/raw.perSec, sleep.perSec/raw.perSec)
	cx, parked := res["shmlink-shm-ctx"], res["shmlink-shm-ctx-parked"]
	fmt.Printf("; cancellable context: shm p50 %v (%.2fx the blocking call's), parked on Go's poller at once p50 %v (%.2fx)",
		cx.p50, float64(cx.p50)/float64(shm.p50), parked.p50, float64(parked.p50)/float64(shm.p50))
	if rust > 0 {
		fmt.Printf("; Rust client (shmlink bench --connect --no-pin, spin, right after) shm p50 %v: Go client p50 / Rust client p50 = %.2fx",
			rust, float64(shm.p50)/float64(rust))
	}
	fmt.Println()
}

// rustClientP50 runs `shmlink bench --connect addr` (64 B, spin wait, 1 s)
// and returns its p50, or 0 when it cannot run.
func rustClientP50(b *testing.B, addr string) time.Duration {
	bin := filepath.Join(repo(b), "target/release/shmlink")
	out := filepath.Join(shortDir(b), "rust.json")
	cmd := exec.Command(bin, "bench", "--connect", addr, "--sizes", "64", "--waits", "spin",
		"--no-baselines", "--no-pin", "--duration", "1", "--reply-ratio", "1", "-q", "--json", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Logf("shmlink bench --connect: %v: %s", err, msg)
		return 0
	}
	data, err := os.ReadFile(out)
	if err != nil {
		b.Log(err)
		return 0
	}
	var records []struct {
		P50us float64 `json:"p50_us"`
	}
	if err := json.Unmarshal(data, &records); err != nil || len(records) == 0 {
		b.Logf("shmlink bench --connect JSON: %v", err)
		return 0
	}
	return time.Duration(records[0].P50us * float64(time.Microsecond))
}

// BenchmarkGoServerShm64: this package's client against this package's
// server (in this process) over shm: the handler callback's cost included.
func BenchmarkGoServerShm64(b *testing.B) {
	srv := goServer(b, func(req []byte) ([]byte, error) { return req, nil })
	c, err := Dial(addrOf(b, srv.Addrs(), "shm:"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := pattern(64, 2)
	buf := make([]byte, 0, 64)
	measure(b, func() error {
		var err error
		buf, err = c.CallAppend(context.Background(), buf[:0], req)
		return err
	})
}

// BenchmarkCallContexts: the price of the context kinds on a 64 B call over
// shm to the Rust echo server, interleaved: context.Background() makes one
// cgo crossing (the C call sends and waits, spinning); a deadline or a
// cancellable context sends and tries to take the answer for up to 50 µs in
// one crossing too, else parks on Go's poller; cancellable-parked parks at once
// (a client without that wait), which is what an answer slower than 50 µs
// costs to be woken for. p50 of each.
func BenchmarkCallContexts(b *testing.B) {
	req := pattern(64, 5)
	echo := rustEcho(b, "--reply-ratio", "1")
	c, err := Dial(echo.addr(b, "shm:"), &Options{Wait: WaitSpin})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	deadline, cancel1 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel1()
	cancellable, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	// The same calls on a client that parks on Go's poller at once (no
	// first wait in C): what an answer slower than that wait costs to be
	// woken for.
	parked, err := Dial(echo.addr(b, "shm:"), &Options{Wait: WaitSpin})
	if err != nil {
		b.Fatal(err)
	}
	defer parked.Close()
	parked.spinWait = 0
	buf := make([]byte, 0, 64)
	var ps []*pinger
	for _, v := range []struct {
		name string
		c    *Client
		ctx  context.Context
	}{{"background", c, context.Background()}, {"deadline", c, deadline}, {"cancellable", c, cancellable},
		{"cancellable-parked", parked, cancellable}} {
		ps = append(ps, &pinger{name: v.name, call: func() error {
			var err error
			buf, err = v.c.CallAppend(v.ctx, buf[:0], req)
			return err
		}})
	}
	for _, p := range ps {
		for i := 0; i < 1000; i++ {
			if err := p.call(); err != nil {
				b.Fatal(err)
			}
		}
		p.lat = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += 500 {
		n := min(500, b.N-done)
		for _, p := range ps {
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if err := p.call(); err != nil {
					b.Fatal(err)
				}
				p.lat = append(p.lat, time.Since(t0))
			}
		}
	}
	b.StopTimer()
	for _, p := range ps {
		sort.Slice(p.lat, func(i, j int) bool { return p.lat[i] < p.lat[j] })
		b.ReportMetric(float64(p.lat[len(p.lat)/2].Nanoseconds()), p.name+"-p50-ns")
	}
}

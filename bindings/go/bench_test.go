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
//     (`shmlink echo --reply-ratio 1`), both with the default wait;
//   - shmlink over unix: the same server, for scale;
//   - Go's net.UnixConn against a minimal Go echo server (the test binary
//     re-executed) with 4-byte length framing: what a Go program would
//     write without shmlink.
//
// Each sub-benchmark reports p50-ns (per-call latencies, measured with
// time.Now around each call) and calls/s; the parent prints the ratios.
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

func BenchmarkPingPong64(b *testing.B) {
	const size = 64
	req := pattern(size, 1)
	results := map[string]pingResult{}
	echo := rustEcho(b, "--reply-ratio", "1")

	for _, scheme := range []string{"shm:", "unix:"} {
		name := "shmlink-" + scheme[:len(scheme)-1]
		b.Run(name, func(b *testing.B) {
			c, err := Dial(echo.addr(b, scheme), &Options{Wait: WaitSpin})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			buf := make([]byte, 0, size)
			results[name] = measure(b, func() error {
				var err error
				buf, err = c.CallAppend(ctx, buf[:0], req)
				if err == nil && len(buf) != size {
					err = fmt.Errorf("%d B back", len(buf))
				}
				return err
			})
		})
	}

	b.Run("go-unixconn", func(b *testing.B) {
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
		results["go-unixconn"] = measure(b, func() error {
			resp, err := rawCall(conn, out, in, req)
			if err == nil && len(resp) != size {
				err = fmt.Errorf("%d B back", len(resp))
			}
			return err
		})
	})

	// The Rust client against the same server, in the same run: what the
	// binding adds to a call (mutex, cgo crossing, copy) shows beside it.
	rust := rustClientP50(b, echo.addr(b, "shm:"))

	shm, okShm := results["shmlink-shm"]
	raw, okRaw := results["go-unixconn"]
	if okShm && okRaw {
		fmt.Printf("64 B ping-pong: shmlink shm p50 %v (%.0f calls/s), shmlink unix p50 %v, Go net.UnixConn p50 %v (%.0f calls/s): "+
			"UnixConn p50 / shm p50 = %.1fx, shm calls/s / UnixConn calls/s = %.1fx",
			shm.p50, shm.perSec, results["shmlink-unix"].p50, raw.p50, raw.perSec,
			float64(raw.p50)/float64(shm.p50), shm.perSec/raw.perSec)
		if rust > 0 {
			fmt.Printf("; Rust client (shmlink bench --connect, spin) shm p50 %v: Go client p50 / Rust client p50 = %.2fx",
				rust, float64(shm.p50)/float64(rust))
		}
		fmt.Println()
	}
}

// rustClientP50 runs `shmlink bench --connect addr` (64 B, spin wait, 1 s)
// and returns its p50, or 0 when it cannot run.
func rustClientP50(b *testing.B, addr string) time.Duration {
	bin := filepath.Join(repo(b), "target/release/shmlink")
	out := filepath.Join(shortDir(b), "rust.json")
	cmd := exec.Command(bin, "bench", "--connect", addr, "--sizes", "64", "--waits", "spin",
		"--no-baselines", "--duration", "1", "--reply-ratio", "1", "-q", "--json", out)
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

// Package shmipcbench compares this binding with CloudWeGo's shmipc-go
// (pure Go, shared memory + a unix socket for events) on a 64 B synchronous
// ping-pong, in one run. A module of its own so that the binding itself
// depends on nothing. Run from bindings/go/bench/shmipc:
//
//	go test -bench . -run '^$'
//
// shmlink is measured with the spin wait (the default) and the sleep wait.
// Both servers run in another process: the Rust echo server
// (`shmlink echo --reply-ratio 1`) for shmlink, this test binary re-executed
// as an shmipc-go echo server for shmipc-go.
package shmipcbench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cloudwego/shmipc-go"
	shmlink "github.com/shmlink/shmlink/bindings/go"
)

const size = 64

func TestMain(m *testing.M) {
	if os.Getenv("SHMIPC_BENCH_SERVER") != "" {
		os.Exit(shmipcServer(os.Getenv("SHMIPC_BENCH_SERVER"), os.Getenv("SHMIPC_BENCH_READY")))
	}
	os.Exit(m.Run())
}

func shmipcConfig(dir string) *shmipc.Config {
	c := shmipc.DefaultConfig()
	c.MemMapType = shmipc.MemMapTypeMemFd
	c.ShareMemoryPathPrefix = filepath.Join("/dev/shm", "slbench-"+strconv.Itoa(os.Getpid()))
	c.QueuePath = c.ShareMemoryPathPrefix + "_queue"
	return c
}

// shmipcServer accepts connections on the unix socket sock, makes each an
// shmipc server session and echoes every stream's 64 B messages.
func shmipcServer(sock, ready string) int {
	shmipc.SetLogLevel(5)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.WriteFile(ready, []byte("ok\n"), 0o600)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return 0
		}
		go func() {
			s, err := shmipc.Server(conn, shmipcConfig(filepath.Dir(sock)))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return
			}
			defer s.Close()
			for {
				st, err := s.AcceptStream()
				if err != nil {
					return
				}
				go func(st *shmipc.Stream) {
					defer st.Close()
					r, w := st.BufferReader(), st.BufferWriter()
					for {
						data, err := r.ReadBytes(size)
						if err != nil {
							return
						}
						if _, err := w.WriteBytes(data); err != nil {
							return
						}
						r.ReleasePreviousRead()
						if err := st.Flush(false); err != nil {
							return
						}
					}
				}(st)
			}
		}()
	}
}

func startServer(b *testing.B, env []string, ready string, bin string, args ...string) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return
		}
		select {
		case <-exited:
			b.Fatalf("%s exited: %s", bin, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not ready: %s", bin, stderr.String())
		}
		time.Sleep(2 * time.Millisecond) // polling the ready file
	}
}

type pinger struct {
	name  string
	call  func() error
	lat   []time.Duration
	spent time.Duration
}

// BenchmarkPingPong64 measures shmlink (the Go client over shm, spin wait,
// against the Rust echo server) and shmipc-go (its client against its echo
// server in another process) in interleaved rounds of 500 calls, b.N calls
// each, so that the drifting load of a shared machine weighs on both alike.
func BenchmarkPingPong64(b *testing.B) {
	req := bytes.Repeat([]byte{7}, size)
	var ps []*pinger

	root, _ := filepath.Abs("../../../..")
	bin := filepath.Join(root, "target/release/shmlink")
	dir, err := os.MkdirTemp("", "slsb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ready := filepath.Join(dir, "ready")
	startServer(b, nil, ready, bin, "echo", "--reply-ratio", "1",
		"--listen", "shm:"+filepath.Join(dir, "e.sock"), "--ready-file", ready)
	addrs, _ := os.ReadFile(ready)
	c, err := shmlink.Dial(strings.Fields(string(addrs))[0], &shmlink.Options{Wait: shmlink.WaitSpin})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 0, size)
	ps = append(ps, &pinger{name: "shmlink-shm", call: func() error {
		var err error
		buf, err = c.CallAppend(context.Background(), buf[:0], req)
		if err == nil && len(buf) != size {
			err = fmt.Errorf("%d B back", len(buf))
		}
		return err
	}})

	// The client sleeping on the futex at once (more robust on a loaded machine).
	cs, err := shmlink.Dial(strings.Fields(string(addrs))[0], &shmlink.Options{Wait: shmlink.WaitSleep})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	bufs := make([]byte, 0, size)
	ps = append(ps, &pinger{name: "shmlink-shm-sleep", call: func() error {
		var err error
		bufs, err = cs.CallAppend(context.Background(), bufs[:0], req)
		if err == nil && len(bufs) != size {
			err = fmt.Errorf("%d B back", len(bufs))
		}
		return err
	}})

	shmipc.SetLogLevel(5)
	ready2 := filepath.Join(dir, "ready2")
	sock := filepath.Join(dir, "ipc.sock")
	exe, _ := os.Executable()
	startServer(b, []string{"SHMIPC_BENCH_SERVER=" + sock, "SHMIPC_BENCH_READY=" + ready2}, ready2, exe, "-test.run=^$")
	conf := shmipc.DefaultSessionManagerConfig()
	conf.Config = shmipcConfig(dir)
	conf.Network = "unix"
	conf.Address = sock
	sm, err := shmipc.NewSessionManager(conf)
	if err != nil {
		b.Fatal(err)
	}
	defer sm.Close()
	st, err := sm.GetStream()
	if err != nil {
		b.Fatal(err)
	}
	defer sm.PutBack(st)
	ps = append(ps, &pinger{name: "shmipc-go", call: func() error {
		if _, err := st.BufferWriter().WriteBytes(req); err != nil {
			return err
		}
		if err := st.Flush(false); err != nil {
			return err
		}
		resp, err := st.BufferReader().ReadBytes(size)
		if err != nil {
			return err
		}
		if len(resp) != size {
			return fmt.Errorf("%d B back", len(resp))
		}
		st.ReleaseReadAndReuse()
		return nil
	}})

	for _, p := range ps {
		for i := 0; i < 1000; i++ {
			if err := p.call(); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
		}
		p.lat = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += 500 {
		n := min(500, b.N-done)
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
	p50 := map[string]time.Duration{}
	perSec := map[string]float64{}
	for _, p := range ps {
		sort.Slice(p.lat, func(i, j int) bool { return p.lat[i] < p.lat[j] })
		p50[p.name] = p.lat[len(p.lat)/2]
		perSec[p.name] = float64(len(p.lat)) / p.spent.Seconds()
		b.ReportMetric(float64(p50[p.name].Nanoseconds()), p.name+"-p50-ns")
		b.ReportMetric(perSec[p.name], p.name+"-calls/s")
	}
	if b.N >= 10000 {
		fmt.Printf("\n64 B ping-pong, %d calls each, interleaved: shmlink (Go client, cgo) shm p50 %v (%.0f calls/s), shmipc-go p50 %v (%.0f calls/s): "+
			"shmlink p50 = %.3f of shmipc-go's (goal <= 0.20), calls/s %.1fx; shmlink shm with the sleep wait p50 %v (%.0f calls/s) = %.3f of shmipc-go's\n",
			b.N, p50["shmlink-shm"], perSec["shmlink-shm"], p50["shmipc-go"], perSec["shmipc-go"],
			float64(p50["shmlink-shm"])/float64(p50["shmipc-go"]), perSec["shmlink-shm"]/perSec["shmipc-go"],
			p50["shmlink-shm-sleep"], perSec["shmlink-shm-sleep"], float64(p50["shmlink-shm-sleep"])/float64(p50["shmipc-go"]))
	}
}

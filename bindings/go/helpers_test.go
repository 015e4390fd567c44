package shmlink

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The helper process: the test binary re-executed with SHMLINK_GO_HELPER set
// serves on the addresses in SHMLINK_GO_ADDRS (a Go server in a process of
// its own, for the tests that kill the server).
func TestMain(m *testing.M) {
	switch os.Getenv("SHMLINK_GO_HELPER") {
	case "serve":
		os.Exit(helperServe())
	case "rawecho":
		os.Exit(helperRawEcho())
	case "worker":
		os.Exit(helperWorker())
	}
	os.Exit(m.Run())
}

func helperServe() int {
	srv, err := Listen(strings.Fields(os.Getenv("SHMLINK_GO_ADDRS")), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hang := make(chan struct{})
	ready := os.Getenv("SHMLINK_GO_READY")
	if err := os.WriteFile(ready+".tmp", []byte(strings.Join(srv.Addrs(), "\n")+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Rename(ready+".tmp", ready); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var held holds
	held.cond = sync.NewCond(&held.mu)
	err = srv.Serve(func(req []byte) ([]byte, error) {
		switch r := string(req); {
		case r == "hang":
			// Tells the test the call is in the handler, then never answers.
			os.WriteFile(os.Getenv("SHMLINK_GO_ENTERED"), nil, 0o600)
			<-hang
		case strings.HasPrefix(r, "hold"):
			held.hold()
		case strings.HasPrefix(r, "held?"):
			// Answers once at least N calls are held (from another session).
			n, _ := strconv.Atoi(strings.TrimPrefix(r, "held?"))
			held.await(n)
			return []byte("ok"), nil
		case strings.HasPrefix(r, "release:"):
			n, _ := strconv.Atoi(strings.TrimPrefix(r, "release:"))
			held.release(n)
			return []byte("ok"), nil
		}
		return req, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// holds: the helper server's held calls ("hold..." requests wait in their
// handler until released by "release:N" from another session; "held?N"
// answers once N are held). Event-driven on both sides: no sleeping.
type holds struct {
	mu       sync.Mutex
	cond     *sync.Cond
	held     int // in their handler now
	released int // releases not yet taken
}

func (h *holds) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held++
	h.cond.Broadcast()
	for h.released == 0 {
		h.cond.Wait()
	}
	h.released--
	h.held--
}

func (h *holds) await(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.held < n {
		h.cond.Wait()
	}
}

func (h *holds) release(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released += n
	h.cond.Broadcast()
}

// helperWorker is a worker of `shmlink pool`: "pid" answers its pid,
// "fail" a remote error, anything else "w:" + request.
func helperWorker() int {
	w, err := ConnectWorker("", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer w.Close()
	err = w.Run(func(req []byte) ([]byte, error) {
		switch string(req) {
		case "pid":
			return []byte(fmt.Sprint(os.Getpid())), nil
		case "fail":
			return nil, &RemoteError{Code: 77, Message: "worker says no"}
		}
		return append([]byte("w:"), req...), nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// repo is the repository's root (bindings/go is two levels down).
func repo(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// shortDir is a temporary directory with a short path (socket paths are
// limited to 107 bytes; t.TempDir's can be longer).
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "slgo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond) // a poll interval, not a wait for an event
	}
}

// proc is a server process started for a test.
type proc struct {
	cmd    *exec.Cmd
	addrs  []string
	stderr *bytes.Buffer
	exited chan struct{}
}

// startProc runs bin with args, then waits for readyFile to appear and
// reads the addresses in it (whitespace-separated).
func startProc(t testing.TB, readyFile string, env []string, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &proc{cmd: cmd, stderr: &stderr, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-p.exited
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(readyFile)
		if err == nil {
			p.addrs = strings.Fields(string(b))
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited before it was ready: %s", bin, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 20 s: %s", bin, stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// addr picks the address of a transport ("shm:", "unix:", "tcp:").
func (p *proc) addr(t testing.TB, scheme string) string {
	t.Helper()
	for _, a := range p.addrs {
		if strings.HasPrefix(a, scheme) {
			return a
		}
	}
	t.Fatalf("no %s address in %v", scheme, p.addrs)
	return ""
}

// rustEcho starts `shmlink echo` on shm, unix and tcp (the Rust server;
// replies with the first ceil(len/8) bytes).
func rustEcho(t testing.TB, extra ...string) *proc {
	t.Helper()
	bin := filepath.Join(repo(t), "target/release/shmlink")
	if _, err := os.Stat(bin); err != nil {
		missingPeer(t, "%s not built (cargo build --release -p shmlink-cli)", bin)
	}
	dir := shortDir(t)
	ready := filepath.Join(dir, "ready")
	args := append([]string{"echo",
		"--listen", "shm:" + filepath.Join(dir, "e.sock"),
		"--listen", "unix:" + filepath.Join(dir, "u.sock"),
		"--listen", "tcp:127.0.0.1:0",
		"--ready-file", ready}, extra...)
	return startProc(t, ready, nil, bin, args...)
}

func ceilEighth(req []byte) []byte  { return req[:(len(req)+7)/8] }
func floorEighth(req []byte) []byte { return req[:len(req)/8] }

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// missingPeer skips a test whose peer program is not built, or fails it
// when SHMLINK_GO_STRICT is set (ci/test.sh: every peer is built there, so
// a missing one is a broken build, not a reason to skip).
func missingPeer(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("SHMLINK_GO_STRICT") != "" {
		t.Fatalf("peer missing (SHMLINK_GO_STRICT): "+format, args...)
	}
	t.Skipf(format, args...)
}

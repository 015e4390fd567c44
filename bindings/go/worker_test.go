package shmlink

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Go workers (the test binary re-executed) behind `shmlink pool`, called by
// the Go client; recycled after 5 calls each (--max-jobs): the worker sees
// stopped and Run returns, the pool starts a new one.
func TestWorkerBehindPool(t *testing.T) {
	bin := filepath.Join(repo(t), "target/release/shmlink")
	if _, err := os.Stat(bin); err != nil {
		missingPeer(t, "%s not built", bin)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := shortDir(t)
	addr := "shm:" + filepath.Join(dir, "pool.sock")
	cmd := exec.Command(bin, "pool", "--listen", addr, "--workers", "2", "--max-jobs", "5",
		"--", exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "SHMLINK_GO_HELPER=worker")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("pool stderr: %s", stderr.String())
		}
	}()

	var c *Client
	waitFor(t, 20*time.Second, "the pool to answer", func() bool {
		if c == nil {
			c, _ = Dial(addr, nil)
			if c == nil {
				return false
			}
		}
		_, err := c.Call(context.Background(), []byte("ping"))
		return err == nil
	})
	defer c.Close()
	pids := map[string]bool{}
	for i := 0; i < 30; i++ {
		resp, err := c.Call(context.Background(), []byte("x"))
		if err != nil || string(resp) != "w:x" {
			t.Fatalf("call %d through the pool: %q %v", i, resp, err)
		}
		pid, err := c.Call(context.Background(), []byte("pid"))
		if err != nil {
			t.Fatal(err)
		}
		pids[string(pid)] = true
	}
	if len(pids) < 3 {
		t.Fatalf("60 calls with --max-jobs 5 were served by %d worker processes, want recycling", len(pids))
	}
	_, err = c.Call(context.Background(), []byte("fail"))
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != 77 || re.Message != "worker says no" {
		t.Fatalf("worker's remote error: %v", err)
	}
}

func TestWorkerConnectErrors(t *testing.T) {
	if _, err := ConnectWorker("unix:"+filepath.Join(shortDir(t), "none.sock"), nil); !errors.Is(err, ErrConnect) {
		t.Fatalf("no pool: %v", err)
	}
	t.Setenv("SHMLINK_WORKER", "")
	if _, err := ConnectWorker("", nil); err == nil {
		t.Fatal("ConnectWorker without SHMLINK_WORKER succeeded")
	}
}

package shmlink

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Go client -> Rust server (`shmlink echo`, first ceil(len/8) bytes).
func TestInteropGoClientRustServer(t *testing.T) {
	p := rustEcho(t)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(p.addr(t, scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, n := range []int{0, 1, 8, 9, 64, 2048, 65, 1 << 20} {
				req := pattern(n, 3)
				resp, err := c.Call(context.Background(), req)
				if err != nil || !bytes.Equal(resp, ceilEighth(req)) {
					t.Fatalf("%d B: %d B back, %v", n, len(resp), err)
				}
			}
			for i := 0; i < 8; i++ {
				if _, err := c.Send(pattern(64+i*8, byte(i))); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 8; i++ {
				_, resp, err := c.Recv(context.Background())
				if err != nil || !bytes.Equal(resp, ceilEighth(pattern(64+i*8, byte(i)))) {
					t.Fatalf("pipelined %d: %v", i, err)
				}
			}
		})
	}
}

// Go client -> the C++ example daemon (first floor(len/8) bytes), when built.
func TestInteropGoClientCppDaemon(t *testing.T) {
	bin := filepath.Join(repo(t), "target/examples/cpp-daemon/shmlink-daemon")
	if _, err := os.Stat(bin); err != nil {
		missingPeer(t, "%s not built (make examples PREFIX=$PWD/target/stage)", bin)
	}
	dir := shortDir(t)
	ready := filepath.Join(dir, "ready")
	p := startProc(t, ready, nil, bin, "--ready-file", ready,
		"shm:"+filepath.Join(dir, "d.sock"), "unix:"+filepath.Join(dir, "u.sock"), "tcp:127.0.0.1:0")
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			c, err := Dial(p.addr(t, scheme), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, n := range []int{0, 7, 64, 2048, 100000} {
				req := pattern(n, 11)
				resp, err := c.Call(context.Background(), req)
				if err != nil || !bytes.Equal(resp, floorEighth(req)) {
					t.Fatalf("%d B: %d B back, %v", n, len(resp), err)
				}
			}
		})
	}
}

// Rust client (`shmlink call`) -> Go server.
func TestInteropRustClientGoServer(t *testing.T) {
	bin := filepath.Join(repo(t), "target/release/shmlink")
	if _, err := os.Stat(bin); err != nil {
		missingPeer(t, "%s not built", bin)
	}
	srv := goServer(t, prefixHandler)
	for _, scheme := range schemes {
		t.Run(strings.TrimSuffix(scheme, ":"), func(t *testing.T) {
			addr := addrOf(t, srv.Addrs(), scheme)
			out, err := exec.Command(bin, "call", addr, "hello from rust").Output()
			if err != nil || string(out) != "go:hello from rust" {
				t.Fatalf("shmlink call: %q, %v", out, err)
			}
			// A remote error reaches the Rust client with its code.
			cmd := exec.Command(bin, "call", addr, "remote")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "42") || !strings.Contains(stderr.String(), "the answer") {
				t.Fatalf("shmlink call of a failing handler: %v, stderr %q", err, stderr.String())
			}
		})
	}
}

// C++ and C clients (the examples, when built) -> Go server answering, like
// the example daemon, the first floor(len/8) bytes: calls checked by the
// clients themselves, the C++ one also pipelined.
func TestInteropExampleClientsGoServer(t *testing.T) {
	srv := goServer(t, func(req []byte) ([]byte, error) { return floorEighth(req), nil })
	for _, ex := range []string{"cpp-client/shmlink-cpp-client", "c-client/shmlink-c-client"} {
		bin := filepath.Join(repo(t), "target/examples", ex)
		if _, err := os.Stat(bin); err != nil {
			t.Logf("%s not built (make examples PREFIX=$PWD/target/stage): skipped", bin)
			continue
		}
		for _, scheme := range schemes {
			out, err := exec.Command(bin, addrOf(t, srv.Addrs(), scheme), "2000").CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v: %s", filepath.Base(bin), scheme, err, out)
			}
			t.Logf("%s %s: %s", filepath.Base(bin), scheme, strings.TrimSpace(string(out)))
		}
	}
}

// PHP client (the extension, when built) -> Go server: a call, and a remote
// error arriving as Shmlink\RemoteException with its code and message.
func TestInteropPHPClientGoServer(t *testing.T) {
	ext := filepath.Join(repo(t), "bindings/php/modules/shmlink.so")
	php, err := exec.LookPath("php")
	if err != nil {
		missingPeer(t, "php not installed")
	}
	if _, err := os.Stat(ext); err != nil {
		missingPeer(t, "%s not built (ci/php-build.sh)", ext)
	}
	srv := goServer(t, prefixHandler)
	const script = `
$c = new Shmlink\Client($argv[1]);
echo $c->call("hello from php"), "\n";
try { $c->call("remote"); echo "no exception\n"; }
catch (Shmlink\RemoteException $e) { echo $e->getCode(), " ", $e->getMessage(), "\n"; }
`
	for _, scheme := range schemes {
		out, err := exec.Command(php, "-n", "-d", "extension="+ext, "-r", script, "--",
			addrOf(t, srv.Addrs(), scheme)).CombinedOutput()
		if err != nil {
			t.Fatalf("php %s: %v: %s", scheme, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || lines[0] != "go:hello from php" || !strings.HasPrefix(lines[1], "42 ") ||
			!strings.Contains(lines[1], "the answer") {
			t.Fatalf("php %s: %q", scheme, out)
		}
		t.Logf("php %s: %q", scheme, lines)
	}
}

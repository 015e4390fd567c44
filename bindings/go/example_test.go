package shmlink_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	shmlink "github.com/shmlink/shmlink/bindings/go"
)

// The README's quick start, run by go test.
func Example() {
	dir, _ := os.MkdirTemp("", "slex")
	defer os.RemoveAll(dir)

	// Server: listen on shared memory and TCP at once.
	srv, err := shmlink.Listen([]string{"shm:" + filepath.Join(dir, "demo.sock"), "tcp:127.0.0.1:0"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(func(req []byte) ([]byte, error) {
		if len(req) == 0 {
			return nil, &shmlink.RemoteError{Code: 400, Message: "empty request"}
		}
		return append([]byte("ok:"), req...), nil
	})
	defer srv.Close()

	// Client: the address picks the transport.
	c, err := shmlink.Dial(srv.Addrs()[0], &shmlink.Options{Timeout: 2 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := c.Call(ctx, []byte("hello"))
	fmt.Printf("%s %v\n", resp, err)

	_, err = c.Call(ctx, nil)
	var remote *shmlink.RemoteError
	switch {
	case errors.Is(err, shmlink.ErrTimeout): // also errors.Is(err, context.DeadlineExceeded)
		fmt.Println("timed out")
	case errors.Is(err, shmlink.ErrClosed): // the server closed or died
		fmt.Println("closed")
	case errors.As(err, &remote):
		fmt.Println(remote.Code, remote.Message)
	}

	// Pipelining and one-way messages.
	id1, _ := c.Send([]byte("a"))
	c.Send([]byte("b"))
	id, resp, err := c.Recv(ctx)
	fmt.Println(id == id1, string(resp), err)
	_, resp, _ = c.Recv(ctx)
	fmt.Println(string(resp))
	fmt.Println(c.Notify([]byte("fire and forget")))
	// Output:
	// ok:hello <nil>
	// 400 empty request
	// true ok:a <nil>
	// ok:b
	// <nil>
}

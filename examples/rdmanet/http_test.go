package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// TestHTTP serves net/http on an rdmanet listener and calls it with a
// client whose transport dials rdmanet: requests with and without bodies,
// kept-alive connections, and bodies larger than the send window.
func TestHTTP(t *testing.T) {
	rtA, rtB := runtimes(t)
	ln, err := rdmanet.Listen(rtB, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.URL.Query().Get("name"))
	})
	mux.HandleFunc("/sum", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	srv := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
	})

	dials := 0
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			dials++
			return rdmanet.Dial(ctx, rtA, addr)
		},
	}}
	defer client.CloseIdleConnections()
	base := "http://" + ln.Addr().String()

	for i := range 20 {
		resp, err := client.Get(fmt.Sprintf("%s/hello?name=n%d", base, i))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != fmt.Sprintf("hello, n%d", i) {
			t.Fatalf("GET %d: %q, %v", i, body, err)
		}
	}
	if dials != 1 {
		t.Errorf("%d connections for 20 sequential requests, want 1 kept alive", dials)
	}

	for _, size := range []int{0, 100, 4096, 1 << 20, 5<<20 + 3} {
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		resp, err := client.Post(base+"/sum", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("%d %x", size, sha256.Sum256(body)); err != nil || string(got) != want {
			t.Fatalf("POST of %d bytes: %q, %v; want %q", size, got, err, want)
		}
	}
}

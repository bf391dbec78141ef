package rdmanet_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

// The conn against TCP over loopback, side by side in one run: a one-way
// stream of writes of each size (the reader reads with a 64 KiB buffer),
// and a ping-pong of 64-byte messages, whose ns/op is one round trip.
// rdmanet is the runtime's defaults (4 KiB messages); rdmanet-64k has
// runtime.WithMessageSize(64 KiB) on both sides, for bulk streams;
// rdmanet-actor-only has the runtime's caller-thread defaults off
// (Tuning.NoInlinePost, Tuning.NoWaitPoll), for comparison.
//
//	go test -run '^$' -bench . -benchtime 2s ./runtime/rdmanet/

// transports are the two kinds of pipe the benchmarks compare.
var transports = []struct {
	name string
	pipe func(b *testing.B) (c1, c2 net.Conn)
}{
	{"rdmanet", func(b *testing.B) (net.Conn, net.Conn) { return pipeOf(b) }},
	{"rdmanet-64k", func(b *testing.B) (net.Conn, net.Conn) { return pipeOf(b, runtime.WithMessageSize(64<<10)) }},
	{"rdmanet-actor-only", func(b *testing.B) (net.Conn, net.Conn) {
		return pipeOf(b, runtime.WithTuning(runtime.Tuning{NoInlinePost: true, NoWaitPoll: true}))
	}},
	{"tcp", tcpPipe},
}

func tcpPipe(b *testing.B) (c1, c2 net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, err = (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	c2 = <-accepted
	b.Cleanup(func() { c1.Close(); c2.Close() })
	return c1, c2
}

func BenchmarkStream(b *testing.B) {
	for _, size := range []int{64, 4096, 65536} {
		for _, tr := range transports {
			b.Run(fmt.Sprintf("size=%d/%s", size, tr.name), func(b *testing.B) {
				c1, c2 := tr.pipe(b)
				total := int64(b.N) * int64(size)
				read := make(chan error, 1)
				go func() {
					n, err := io.CopyBuffer(io.Discard, io.LimitReader(c2, total), make([]byte, 64<<10))
					if err == nil && n != total {
						err = io.ErrUnexpectedEOF
					}
					read <- err
				}()
				p := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := c1.Write(p); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-read; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func BenchmarkPingPong(b *testing.B) {
	const size = 64
	for _, tr := range transports {
		b.Run(fmt.Sprintf("size=%d/%s", size, tr.name), func(b *testing.B) {
			c1, c2 := tr.pipe(b)
			echoed := make(chan error, 1)
			go func() {
				buf := make([]byte, size)
				for {
					if _, err := io.ReadFull(c2, buf); err != nil {
						if err == io.EOF {
							err = nil
						}
						echoed <- err
						return
					}
					if _, err := c2.Write(buf); err != nil {
						echoed <- err
						return
					}
				}
			}()
			buf := make([]byte, size)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c1.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c1, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			c1.Close()
			if err := <-echoed; err != nil {
				b.Fatal(err)
			}
		})
	}
}

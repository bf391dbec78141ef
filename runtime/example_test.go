package runtime_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"time"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// examplePair connects two endpoints of rt to each other: a client that
// dialed and the server side it reached.
func examplePair(ctx context.Context, rt *vrt.Runtime) (cli, srv *vrt.Endpoint) {
	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *vrt.Endpoint, 1)
	go func() {
		ep, err := ln.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		accepted <- ep
	}()
	cli, err = rt.Dial(ctx, ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	return cli, <-accepted
}

// Every operation returns a Future at once; Wait blocks until it completes
// or the context ends.
func ExampleFuture() {
	ctx := context.Background()
	rt, err := vrt.New() // the pure-Go soft provider
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	cli, _ := examplePair(ctx, rt)

	local, _ := rt.Alloc(64)
	remote, _ := rt.Alloc(64) // on a real peer: memory it exposed
	exp, _ := remote.Expose(vrt.RemoteWrite)
	defer exp.Close()
	n := copy(local.Bytes(), "into the peer's memory")

	f := cli.Write(ctx, local.Slice(0, n), exp.RemoteRef())
	c, err := f.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote %d bytes: %q\n", c.ByteLen, remote.Bytes()[:n])
	// Output: wrote 22 bytes: "into the peer's memory"
}

// Then runs a callback on the runtime's worker pool once the operation
// completes, and consumes the future: the caller goes on at once.
func ExampleFuture_Then() {
	ctx := context.Background()
	rt, err := vrt.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	cli, _ := examplePair(ctx, rt)

	counter, _ := rt.Alloc(8) // atomics need an 8-byte aligned word; Alloc's are
	binary.NativeEndian.PutUint64(counter.Bytes(), 41)
	exp, _ := counter.Expose(vrt.RemoteAtomic)
	defer exp.Close()

	done := make(chan struct{})
	cli.FetchAdd(ctx, exp.RemoteRef(), 1).Then(func(c vrt.Completion, err error) {
		defer close(done)
		if err != nil {
			fmt.Println("fetch-add:", err)
			return
		}
		fmt.Println("the counter was", c.Value)
	})
	<-done // only so that the output is there before the example ends
	fmt.Println("now it is", binary.NativeEndian.Uint64(counter.Bytes()))
	// Output:
	// the counter was 41
	// now it is 42
}

// Done returns a channel, to wait for an operation in a select together
// with other events.
func ExampleFuture_Done() {
	ctx := context.Background()
	rt, err := vrt.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	cli, _ := examplePair(ctx, rt)

	word, _ := rt.Alloc(8)
	binary.NativeEndian.PutUint64(word.Bytes(), 7)
	exp, _ := word.Expose(vrt.RemoteAtomic)
	defer exp.Close()

	f := cli.CompareAndSwap(ctx, exp.RemoteRef(), 7, 8)
	select {
	case <-f.Done():
		c, err := f.Result() // does not consume the future...
		f.Release()          // ...Release does
		fmt.Println("swapped:", err == nil && c.Value == 7)
	case <-time.After(10 * time.Second):
		f.Release() // a pending future may be released too
		fmt.Println("timed out")
	}
	// Output: swapped: true
}

// An Endpoint is one end of a reliable connection. Listen and Dial carry
// only the handshake, over TCP; Send and Recv carry messages.
func ExampleEndpoint() {
	ctx := context.Background()
	rt, err := vrt.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		srv, err := ln.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		m, err := srv.Recv(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("server got %q\n", m.Bytes())
		m.Release() // the receive buffer goes back to the endpoint
		ack, _ := rt.Alloc(8)
		srv.Send(ctx, ack.Slice(0, copy(ack.Bytes(), "ack"))).Wait(ctx)
	}()

	cli, err := rt.Dial(ctx, ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	msg, _ := rt.Alloc(64) // Send takes registered memory
	n := copy(msg.Bytes(), "hello over RDMA SEND")
	if _, err := cli.Send(ctx, msg.Slice(0, n)).Wait(ctx); err != nil {
		log.Fatal(err)
	}
	reply, err := cli.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("client got %q\n", reply.Bytes())
	reply.Release()
	// Output:
	// server got "hello over RDMA SEND"
	// client got "ack"
}

// FetchAdd adds to a remote 64-bit word atomically and reports what was
// there before.
func ExampleEndpoint_FetchAdd() {
	ctx := context.Background()
	rt, err := vrt.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	cli, _ := examplePair(ctx, rt)

	counter, _ := rt.Alloc(8)
	binary.NativeEndian.PutUint64(counter.Bytes(), 10) // host order, as the device sees it
	exp, _ := counter.Expose(vrt.RemoteAtomic)
	defer exp.Close()

	c, err := cli.FetchAdd(ctx, exp.RemoteRef(), 5).Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("old:", c.Value)
	fmt.Println("new:", binary.NativeEndian.Uint64(counter.Bytes()))
	// Output:
	// old: 10
	// new: 15
}

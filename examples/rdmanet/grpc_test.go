package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// grpcClient serves echoService on an rdmanet listener of rtB and returns
// a client dialing it from rtA through rdmanet.Dial.
func grpcClient(t *testing.T) testpb.TestServiceClient {
	t.Helper()
	rtA, rtB := runtimes(t)
	ln, err := rdmanet.Listen(rtB, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, echoService{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return rdmanet.Dial(ctx, rtA, addr)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return testpb.NewTestServiceClient(cc)
}

func TestGRPCUnary(t *testing.T) {
	client := grpcClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Sizes around the message size (4 KiB), gRPC's frame size (16 KiB)
	// and its initial flow-control window (64 KiB).
	for _, size := range []int{0, 1, 4095, 4096, 4097, 16 << 10, 100 << 10, 1 << 20} {
		body := bytes.Repeat([]byte{byte(size)}, size)
		resp, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}})
		if err != nil {
			t.Fatalf("UnaryCall of %d bytes: %v", size, err)
		}
		if !bytes.Equal(resp.GetPayload().GetBody(), body) {
			t.Fatalf("UnaryCall of %d bytes: the echo differs (%d bytes back)", size, len(resp.GetPayload().GetBody()))
		}
	}
	// Many at once, on the one connection gRPC multiplexes them over.
	errs := make(chan error, 64)
	for i := range 64 {
		go func() {
			body := bytes.Repeat([]byte{byte(i)}, 1000+i)
			resp, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}})
			if err == nil && !bytes.Equal(resp.GetPayload().GetBody(), body) {
				err = io.ErrUnexpectedEOF
			}
			errs <- err
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent UnaryCall: %v", err)
		}
	}
}

func TestGRPCStreaming(t *testing.T) {
	client := grpcClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Server streaming: one response per size asked for.
	var params []*testpb.ResponseParameters
	var sizes []int
	for i := range 50 {
		size := (i * 7919) % (70 << 10)
		sizes = append(sizes, size)
		params = append(params, &testpb.ResponseParameters{Size: int32(size)})
	}
	out, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: params})
	if err != nil {
		t.Fatal(err)
	}
	for i, size := range sizes {
		resp, err := out.Recv()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body := resp.GetPayload().GetBody()
		if len(body) != size {
			t.Fatalf("response %d: %d bytes, want %d", i, len(body), size)
		}
		for j, b := range body {
			if b != byte(j) {
				t.Fatalf("response %d: byte %d is %d, want %d", i, j, b, byte(j))
			}
		}
	}
	if _, err := out.Recv(); err != io.EOF {
		t.Fatalf("after the last response: %v, want io.EOF", err)
	}

	// Bidirectional: each request answered as it comes, while the client
	// keeps sending.
	duplex, err := client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	sendErr := make(chan error, 1)
	go func() {
		for i := range n {
			body := bytes.Repeat([]byte{byte(i)}, i*100)
			if err := duplex.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- duplex.CloseSend()
	}()
	for i := range n {
		resp, err := duplex.Recv()
		if err != nil {
			t.Fatalf("duplex response %d: %v", i, err)
		}
		if want := bytes.Repeat([]byte{byte(i)}, i*100); !bytes.Equal(resp.GetPayload().GetBody(), want) {
			t.Fatalf("duplex response %d differs", i)
		}
	}
	if _, err := duplex.Recv(); err != io.EOF {
		t.Fatalf("after the last duplex response: %v, want io.EOF", err)
	}
	if err := <-sendErr; err != nil {
		t.Fatalf("duplex Send: %v", err)
	}
}

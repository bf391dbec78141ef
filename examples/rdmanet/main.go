// Command rdmanet runs a gRPC service over RDMA: gRPC's interop
// TestService on a runtime's rdmanet listener, and a client calling it
// through rdmanet.Dial. Against the same program over TCP, only the
// listener and the client's dialer differ (the -tcp flag runs it so).
//
//	go run ./examples/rdmanet            # from this module's directory: go run .
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

func main() {
	tcp := flag.Bool("tcp", false, "run over TCP on loopback instead, for comparison")
	calls := flag.Int("n", 1000, "unary calls to time")
	flag.Parse()
	ctx := context.Background()

	rt, err := runtime.New() // the soft provider; runtime.WithProvider(ibv.New()) for a device
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	// The server: a listener, then Serve, as over TCP.
	var ln net.Listener
	if *tcp {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	} else {
		ln, err = rdmanet.Listen(rt, "127.0.0.1:0")
	}
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, echoService{})
	go srv.Serve(ln)
	defer srv.Stop()

	// The client: a dialer, then calls, as over TCP.
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return rdmanet.Dial(ctx, rt, addr) }
	if *tcp {
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
	}
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
		grpc.WithContextDialer(dial), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	client := testpb.NewTestServiceClient(cc)

	req := &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hello over RDMA")}}
	resp, err := client.UnaryCall(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("UnaryCall: %q\n", resp.GetPayload().GetBody())
	start := time.Now()
	for range *calls {
		if _, err := client.UnaryCall(ctx, req); err != nil {
			log.Fatal(err)
		}
	}
	transport := "rdmanet (" + rt.Provider().Name() + ")"
	if *tcp {
		transport = "TCP"
	}
	fmt.Printf("%d unary calls over %s: %v each\n", *calls, transport, time.Since(start)/time.Duration(*calls))
}

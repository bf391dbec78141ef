// Command rdmanet runs a gRPC service over RDMA: gRPC's interop
// TestService on a runtime's rdmanet listener, and a client calling it
// through rdmanet.Dial. Against the same program over TCP, only the
// listener and the client's dialer differ (the -tcp flag runs it so).
//
//	go run .                        # in examples/rdmanet: the soft provider
//	go run . -tcp                   # the same over TCP on loopback
//	rdmanet -provider ibv -server-addr 198.18.0.2:0   # client on the first device, server on the second
//
// It prints the first call's echo and the mean time of -n more calls.
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
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

func main() {
	tcp := flag.Bool("tcp", false, "run over TCP instead, for comparison")
	calls := flag.Int("n", 1000, "unary calls to time")
	provider := flag.String("provider", "soft", "soft, or ibv: the client's runtime on the first device, the server's on the second")
	serverAddr := flag.String("server-addr", "127.0.0.1:0", "the server's listening address")
	clientAddr := flag.String("client-addr", "", "with -tcp, the address the client dials from")
	flag.Parse()
	ctx := context.Background()

	cliRT, srvRT, err := openRuntimes(*provider)
	if err != nil {
		log.Fatal(err)
	}
	defer cliRT.Close(ctx)
	defer srvRT.Close(ctx)

	// The server: a listener, then Serve, as over TCP.
	var ln net.Listener
	if *tcp {
		ln, err = net.Listen("tcp", *serverAddr)
	} else {
		ln, err = rdmanet.Listen(srvRT, *serverAddr)
	}
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, echoService{})
	go srv.Serve(ln)
	defer srv.Stop()

	// The client: a dialer, then calls, as over TCP.
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return rdmanet.Dial(ctx, cliRT, addr) }
	if *tcp {
		d := &net.Dialer{}
		if *clientAddr != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(*clientAddr)}
		}
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
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
	transport := "rdmanet (" + cliRT.Provider().Name() + ")"
	if *tcp {
		transport = "TCP"
	}
	fmt.Printf("%d unary calls over %s: %v each\n", *calls, transport, time.Since(start)/time.Duration(*calls))
}

// openRuntimes opens the client's and the server's runtime: both on the soft
// provider, or on the ibv provider's first and second devices.
func openRuntimes(provider string) (cli, srv *runtime.Runtime, err error) {
	switch provider {
	case "soft":
		if cli, err = runtime.New(); err == nil {
			srv, err = runtime.New()
		}
	case "ibv":
		p := ibv.New()
		devs, derr := p.Devices()
		if derr != nil || len(devs) == 0 {
			return nil, nil, fmt.Errorf("no RDMA device: %v", derr)
		}
		if cli, err = runtime.New(runtime.WithProvider(p), runtime.WithDevice(devs[0].Name())); err == nil {
			srv, err = runtime.New(runtime.WithProvider(p), runtime.WithDevice(devs[len(devs)-1].Name()))
		}
	default:
		err = fmt.Errorf("-provider %q: want soft or ibv", provider)
	}
	return cli, srv, err
}

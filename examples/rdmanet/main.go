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
//
// With -serve or -connect the server and the client are two processes, as
// services are deployed, each with its own runtime (and Go scheduler):
//
//	rdmanet -provider ibv -d rxe1 -serve 198.18.0.2:7600    # serves until interrupted
//	rdmanet -provider ibv -d rxe0 -connect 198.18.0.2:7600  # calls it, prints, exits
//	rdmanet -tcp -serve 198.18.0.2:7601
//	rdmanet -tcp -client-addr 198.18.0.1 -connect 198.18.0.2:7601
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

func main() {
	tcp := flag.Bool("tcp", false, "run over TCP instead, for comparison")
	calls := flag.Int("n", 1000, "unary calls to time")
	provider := flag.String("provider", "soft", "soft, or ibv: the client's runtime on the first device, the server's on the second")
	device := flag.String("d", "", "with -serve or -connect and -provider ibv, the device of this process's runtime (default: the last for -serve, the first for -connect)")
	serverAddr := flag.String("server-addr", "127.0.0.1:0", "the server's listening address")
	clientAddr := flag.String("client-addr", "", "with -tcp, the address the client dials from")
	serve := flag.String("serve", "", "only serve, on this address, until interrupted (a process of its own)")
	connect := flag.String("connect", "", "only call the server at this address (a process of its own)")
	waitPoll := flag.Duration("wait-poll", -1, "the runtimes' Tuning.WaitPoll (0: no waiter polling; negative: the runtime's default)")
	flag.Parse()
	ctx := context.Background()
	if *serve != "" && *connect != "" {
		log.Fatal("-serve and -connect: one process is one of the two")
	}
	if (*serve != "" || *connect != "") && !*tcp && *provider == "soft" {
		log.Fatal("-serve and -connect need -provider ibv or -tcp: the soft provider's devices live in one process")
	}

	var cliRT, srvRT *runtime.Runtime
	if !*tcp {
		var opts []runtime.Option
		switch {
		case *waitPoll == 0:
			opts = append(opts, runtime.WithTuning(runtime.Tuning{NoWaitPoll: true}))
		case *waitPoll > 0:
			opts = append(opts, runtime.WithTuning(runtime.Tuning{WaitPoll: *waitPoll}))
		}
		var err error
		switch {
		case *serve != "":
			srvRT, err = openRuntime(*provider, *device, false, opts...)
		case *connect != "":
			cliRT, err = openRuntime(*provider, *device, true, opts...)
		default:
			cliRT, srvRT, err = openRuntimes(*provider, opts...)
		}
		if err != nil {
			log.Fatal(err)
		}
		for _, rt := range []*runtime.Runtime{cliRT, srvRT} {
			if rt != nil {
				defer rt.Close(ctx)
			}
		}
	}

	addr := *connect
	if *connect == "" {
		// The server: a listener, then Serve, as over TCP.
		listenAt := *serverAddr
		if *serve != "" {
			listenAt = *serve
		}
		var ln net.Listener
		var err error
		if *tcp {
			ln, err = net.Listen("tcp", listenAt)
		} else {
			ln, err = rdmanet.Listen(srvRT, listenAt)
		}
		if err != nil {
			log.Fatal(err)
		}
		srv := grpc.NewServer()
		testpb.RegisterTestServiceServer(srv, echoService{})
		go srv.Serve(ln)
		defer srv.Stop()
		if *serve != "" {
			fmt.Printf("serving on %s\n", ln.Addr())
			sig, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			<-sig.Done()
			return
		}
		addr = ln.Addr().String()
	}

	// The client: a dialer, then calls, as over TCP.
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return rdmanet.Dial(ctx, cliRT, addr) }
	if *tcp {
		d := &net.Dialer{}
		if *clientAddr != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(*clientAddr)}
		}
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	cc, err := grpc.NewClient("passthrough:///"+addr,
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
	transport := "TCP"
	if !*tcp {
		transport = "rdmanet (" + cliRT.Stats().Provider + ")"
	}
	processes := "one process"
	if *connect != "" {
		processes = "two processes"
	}
	fmt.Printf("%d unary calls over %s, %s: %v each\n", *calls, transport, processes, time.Since(start)/time.Duration(*calls))
}

// openRuntimes opens the client's and the server's runtime in this
// process: both on the soft provider, or on the ibv provider's first and
// last devices.
func openRuntimes(provider string, opts ...runtime.Option) (cli, srv *runtime.Runtime, err error) {
	if cli, err = openRuntime(provider, "", true, opts...); err != nil {
		return nil, nil, err
	}
	if srv, err = openRuntime(provider, "", false, opts...); err != nil {
		cli.Close(context.Background())
		return nil, nil, err
	}
	return cli, srv, nil
}

// openRuntime opens a runtime: on the soft provider, or on the ibv
// provider's device dev (when "", its first device for a client, its last
// for a server).
func openRuntime(provider, dev string, client bool, opts ...runtime.Option) (*runtime.Runtime, error) {
	nth := -1
	if client {
		nth = 0
	}
	rt, err := benchkit.OpenRuntime(provider, dev, nth, opts...)
	if err != nil && provider != "soft" && provider != "ibv" {
		return nil, fmt.Errorf("-provider %q: want soft or ibv", provider)
	}
	return rt, err
}

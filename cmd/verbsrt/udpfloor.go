package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"

	"github.com/verbsrt/verbsrt/internal/udpfloor"
)

// runUDPFloor is "verbsrt udpfloor": the UDP floor (internal/udpfloor),
// plain Go moving the rocev2 provider's datagrams over UDP, as a server
// (-server: one client on TCP port -p), a client (HOST), or both ends in
// this process.
func runUDPFloor(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("udpfloor", "usage: verbsrt udpfloor [flags] -server    server: wait for a client on -p\n"+
		"       verbsrt udpfloor [flags] HOST       client: run the tests against the server at HOST\n"+
		"       verbsrt udpfloor [flags]            both ends in this process (a self-test)\n\n"+
		"The UDP floor: plain Go (the standard library and x/net/ipv6's recvmmsg and sendmmsg) moving\n"+
		"the datagrams the rocev2 provider would, what its figures are read against. Tests are rr:SIZE\n"+
		"(a datagram and its echo at a time) and stream:SIZE:BATCH (one-way messages cut into datagrams\n"+
		"of at most 4096 bytes of payload, the provider's path MTU, BATCH a system call, under a window\n"+
		"the server acknowledges every half). Each datagram carries the 32 bytes of a RoCE v2 WRITE's\n"+
		"headers beside its payload. Both ends report their CPU time per operation (getrusage).")
	server := fs.Bool("server", false, "serve one client on TCP port -p")
	port := fs.Int("p", 18517, "TCP port of the control connection (a server's 0: a free one, said on stderr)")
	addr := fs.String("addr", "::1", "the address this end's UDP socket binds (the server's is announced to the client)")
	tests := fs.String("tests", udpfloor.DefaultTests, "the client's tests, comma-separated, in order")
	count := fs.Int("n", 0, "messages (round trips for rr) a test moves (0: by kind and size)")
	window := fs.Int("window", udpfloor.DefaultWindow, "datagrams a stream keeps unacknowledged at most")
	asJSON := fs.Bool("json", false, "print each result as a JSON object")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	a, err := netip.ParseAddr(*addr)
	if err != nil {
		return usageErrorf("-addr %s: %v", *addr, err)
	}
	cfg := udpfloor.Config{Window: *window, Addr: a}
	if cfg.Tests, err = udpfloor.ParseTests(*tests, *count); err != nil {
		return usageErrorf("-tests: %v", err)
	}
	switch {
	case fs.NArg() > 1 || (fs.NArg() == 1 && *server):
		return usageErrorf("a server takes no host, a client one (got %q)", fs.Args())
	case *port < 0 || *port > 65535 || (*port == 0 && !*server):
		return usageErrorf("-p %d: not a TCP port", *port)
	case *window < 1:
		return usageErrorf("-window %d: at least 1", *window)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	report := func(r udpfloor.Result) { printFloorResult(stdout, *asJSON, r) }
	if !*asJSON {
		fmt.Fprintln(stdout, " #test   #bytes  #batch  #count      MsgRate[Mpps]  BW[MB/sec]  usec/op    client_cpu[ns/op]  server_cpu[ns/op]  lost")
	}
	switch {
	case *server:
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(*port))
		if err != nil {
			return fmt.Errorf("couldn't listen on port %d: %w", *port, err)
		}
		defer ln.Close()
		fmt.Fprintf(stderr, "verbsrt udpfloor: waiting for a client on %s\n", ln.Addr())
		stopAccept := context.AfterFunc(ctx, func() { ln.Close() })
		c, err := ln.Accept()
		stopAccept()
		if err != nil {
			return fmt.Errorf("accept() failed: %w", err)
		}
		defer c.Close()
		return udpfloor.Serve(ctx, c, a, report)
	case fs.NArg() == 1:
		host := fs.Arg(0)
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, benchTimeout)
		c, err := d.DialContext(dctx, "tcp", net.JoinHostPort(host, strconv.Itoa(*port)))
		cancel()
		if err != nil {
			return err
		}
		defer c.Close()
		return udpfloor.Run(ctx, c, cfg, report)
	}
	return udpfloor.RunPair(ctx, cfg, report)
}

// printFloorResult prints r as a line of the table, or as JSON.
func printFloorResult(w io.Writer, asJSON bool, r udpfloor.Result) {
	if asJSON {
		json.NewEncoder(w).Encode(r)
		return
	}
	fmt.Fprintf(w, " %-7s %-7d %-7d %-10d  %-13.6f  %-10.2f  %-9.2f  %-17.0f  %-17.0f  %d\n", r.Kind, r.Size, r.Batch, r.Count,
		r.MsgRateMpps, r.MBps, r.UsecPerOp, r.ClientCPUNsPerOp, r.ServerCPUNsPerOp, r.Lost)
}

//go:build linux && cgo

package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/atomic"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// The two-process test: this test binary, started again with peerEnv set,
// is the server; the test is the client. They share nothing but the RDMA
// device and the address the server prints, as two hosts would.
//
// On the endpoint, after the connection:
//
//	server -> client  SEND: the RemoteRef of the server's region (16 bytes:
//	                  address, rkey, length, little-endian)
//	client            the mixed workload into that region and at the
//	                  server's receives (16-byte messages, one byte
//	                  repeated); then a READ of the counters
//	client -> server  SEND: 8 bytes of 0xff, then how many messages it sent
//	server -> client  SEND: "ok" or "bad", then how many messages arrived
//	client            closes its endpoint: the server's Recv returns io.EOF
const (
	crossGoroutines = 8
	crossOps        = 100
)

func init() {
	servePeer = func(peer string) int {
		if rest, ok := strings.CutPrefix(peer, "matrix-"); ok {
			return matrixServer(rest)
		}
		return crossServer(peer)
	}
}

// remoteEnv, "MODE ADDR", makes TestIBVTwoProcesses connect its MODE
// subtest to a server already listening at ADDR (another host's, started
// with peerEnv) instead of starting one.
const remoteEnv = "VERBSRT_RUNTIME_TEST_REMOTE"

// crossServer is the server process of TestIBVTwoProcesses: peer is
// "MODE DEVICE [PORT]" (MODE tcp or cm; PORT 0 or none: any). It prints
// "listening ADDR", serves one client and returns the exit status.
func crossServer(peer string) int {
	var mode, dev, port string
	fmt.Sscan(peer, &mode, &dev, &port)
	if port == "" {
		port = "0"
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "server: "+format+"\n", args...)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rt, err := runtime.New(runtime.WithProvider(ibv.New()), runtime.WithDevice(dev), runtime.WithMemoryLimit(8<<20))
	if err != nil {
		return fail("runtime.New on %s: %v", dev, err)
	}
	defer rt.Close(context.Background())
	ip := netip.AddrFrom16(rt.Stats().GID).Unmap()
	if !ip.Is4() {
		return fail("device %s has GID %v, not an IPv4-mapped one", dev, ip)
	}
	mode, hold := strings.CutSuffix(mode, "-hold")
	var ln *runtime.Listener
	if mode == "cm" {
		ln, err = rt.ListenCM(ip.String() + ":" + port)
	} else {
		ln, err = rt.Listen(":" + port)
	}
	if err != nil {
		return fail("listen (%s): %v", mode, err)
	}
	defer ln.Close()
	bound := netip.MustParseAddrPort(ln.Addr().String()).Port()
	fmt.Printf("listening %s\n", netip.AddrPortFrom(ip, bound))
	ep, err := ln.Accept(ctx)
	if err != nil {
		return fail("accept: %v", err)
	}
	if hold { // TestIBVPeerKilled kills this process now
		fmt.Println("accepted")
		<-ctx.Done()
		return fail("not killed")
	}
	defer ep.Close(context.Background())

	region, err := rt.Alloc(crossGoroutines*mixedSlot + mixedCounterBytes)
	if err != nil {
		return fail("alloc: %v", err)
	}
	exp, err := region.Expose(allRights)
	if err != nil {
		return fail("expose: %v", err)
	}
	defer exp.Close()
	ref, _ := exp.RemoteRef().MarshalBinary()
	msg, err := rt.Alloc(16)
	if err != nil {
		return fail("alloc: %v", err)
	}
	if _, err := ep.SendBytes(ctx, ref).Wait(ctx); err != nil {
		return fail("send the region: %v", err)
	}

	var received atomic.Int64
	want := make(chan int64, 1)
	recvErr := make(chan error, 1)
	go func() {
		recvErr <- receiveMixed(ctx, ep, &received, func(m []byte) bool {
			if len(m) == 16 && bytes.Equal(m[:8], bytes.Repeat([]byte{0xff}, 8)) {
				want <- int64(binary.LittleEndian.Uint64(m[8:]))
				return true
			}
			return false
		})
	}()
	var n int64
	select {
	case n = <-want:
	case err := <-recvErr:
		return fail("receive: %v", err)
	}
	for received.Load() < n && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	verdict := "ok"
	if received.Load() != n {
		verdict = "bad"
	}
	b := msg.Bytes()
	copy(b, verdict+"\x00\x00\x00\x00\x00\x00")
	binary.LittleEndian.PutUint64(b[8:], uint64(received.Load()))
	if _, err := ep.Send(ctx, msg.Slice(0, 16)).Wait(ctx); err != nil {
		return fail("send the verdict: %v", err)
	}
	if verdict != "ok" {
		return fail("%d messages arrived, the client sent %d", received.Load(), n)
	}
	// The client closes its end once it has the verdict: this side learns
	// it from the client's goodbye (Recv's io.EOF, Done, ErrPeerClosed).
	select {
	case err := <-recvErr:
		if !errors.Is(err, io.EOF) || !errors.Is(ep.Err(), runtime.ErrPeerClosed) {
			return fail("after the client closed: Recv %v, Err %v; want io.EOF and ErrPeerClosed", err, ep.Err())
		}
	case <-ctx.Done():
		return fail("the client's close never reached this side")
	}
	<-ep.Done()
	return 0
}

// TestIBVTwoProcesses runs the exactly-once mixed workload between two
// processes, a server on the second device and this test on the first,
// connected by the TCP handshake and by the connection manager (rdma_cm):
// every operation succeeds once, the server's memory, counters and
// messages add up, and both processes exit cleanly. With remoteEnv set, the
// server is another host's (verbs/ibv/rxevm/cross).
func TestIBVTwoProcesses(t *testing.T) {
	devA, devB := ibvDevices(t)
	remoteMode, remoteAddr, remote := strings.Cut(os.Getenv(remoteEnv), " ")
	for _, mode := range []string{"tcp", "cm"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			if remote {
				if mode != remoteMode {
					t.Skipf("%s names a %s server", remoteEnv, remoteMode)
				}
				crossClient(t, ctx, mode, devA, remoteAddr, nil)
				return
			}
			srv := startPeer(t, ctx, mode+" "+devB)
			go io.Copy(io.Discard, srv.out)
			crossClient(t, ctx, mode, devA, srv.addr, &srv.stderr)
			if err := srv.wait(); err != nil {
				t.Errorf("server process (pid %d): %v; stderr:\n%s", srv.cmd.Process.Pid, err, srv.stderr.String())
			}
		})
	}
}

// ibvDevices returns the device names of the two ends, the first and the
// second device (the first twice on a host with one), or skips the test
// where there is no RDMA device.
func ibvDevices(t *testing.T) (devA, devB string) {
	t.Helper()
	devs, err := ibv.New().Devices()
	if err != nil || len(devs) == 0 {
		t.Skipf("no RDMA device (%v): the runtime's ibv tests run in the rxevm guest, verbs/ibv/rxevm/test-rxe", err)
	}
	devA, devB = devs[0].Name(), devs[0].Name()
	if len(devs) > 1 {
		devB = devs[1].Name()
	}
	return devA, devB
}

// peerProcess is this test binary started again as a server (peerEnv).
type peerProcess struct {
	cmd    *exec.Cmd
	in     io.WriteCloser // its stdin
	out    *bufio.Reader  // its stdout, after the "listening" line
	stderr bytes.Buffer
	addr   string // where it listens
	exited bool
}

// startPeer starts the server process for peer ("MODE DEVICE ...") and
// waits for the address it listens on; stop kills it unless it exited.
func startPeer(t *testing.T, ctx context.Context, peer string) *peerProcess {
	t.Helper()
	p := &peerProcess{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), peerEnv+"="+peer)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	p.out = bufio.NewReader(out)
	line, err := p.out.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		p.wait()
		t.Fatalf("server printed %q (%v); stderr:\n%s", line, err, p.stderr.String())
	}
	p.addr = addr
	return p
}

func (p *peerProcess) wait() error {
	p.exited = true
	return p.cmd.Wait()
}

func (p *peerProcess) stop() {
	if !p.exited {
		p.cmd.Process.Kill()
		p.wait()
	}
}

// crossClient is the client of TestIBVTwoProcesses, on device dev, of the
// server at addr; srvErr, when not nil, is the server's stderr so far.
func crossClient(t *testing.T, ctx context.Context, mode, dev, addr string, srvErr *bytes.Buffer) {
	serverSaid := func() string {
		if srvErr == nil {
			return ""
		}
		return "; server stderr:\n" + srvErr.String()
	}
	rt, err := runtime.New(runtime.WithProvider(ibv.New()), runtime.WithDevice(dev), runtime.WithMemoryLimit(8<<20))
	if err != nil {
		t.Fatalf("runtime.New on %s: %v", dev, err)
	}
	defer rt.Close(context.Background())
	var cli *runtime.Endpoint
	if mode == "cm" {
		cli, err = rt.DialCM(ctx, addr)
	} else {
		cli, err = rt.Dial(ctx, addr)
	}
	if err != nil {
		t.Fatalf("dial %s (%s): %v%s", addr, mode, err, serverSaid())
	}
	defer cli.Close(context.Background())
	t.Logf("%s: QP %#x on %s (pid %d) <-> %s", mode, cli.QPN(), dev, os.Getpid(), addr)

	m, err := cli.Recv(ctx)
	if err != nil {
		t.Fatalf("receiving the server's region: %v%s", err, serverSaid())
	}
	var remote runtime.RemoteRef
	if err := remote.UnmarshalBinary(m.Bytes()); err != nil {
		t.Fatalf("the server's region: %v", err)
	}
	m.Release()

	var tally mixedTally
	runMixed(t, ctx, rt, cli, remote, crossGoroutines, crossOps, &tally)
	counters, err := rt.Alloc(mixedCounterBytes + 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Read(ctx, counters.Slice(0, mixedCounterBytes), remote.At(crossGoroutines*mixedSlot)).Wait(ctx); err != nil {
		t.Fatalf("reading the counters back: %v", err)
	}
	checkMixedCounters(t, counters.Bytes()[:mixedCounterBytes], crossGoroutines, &tally)

	ctl := counters.Bytes()[mixedCounterBytes:]
	copy(ctl, bytes.Repeat([]byte{0xff}, 8))
	binary.LittleEndian.PutUint64(ctl[8:], uint64(tally.sends.Load()))
	if _, err := cli.Send(ctx, counters.Slice(mixedCounterBytes, 16)).Wait(ctx); err != nil {
		t.Fatalf("sending the count: %v", err)
	}
	m, err = cli.Recv(ctx)
	if err != nil {
		t.Fatalf("waiting for the server's verdict: %v%s", err, serverSaid())
	}
	verdict := string(bytes.TrimRight(m.Bytes()[:8], "\x00"))
	arrived := binary.LittleEndian.Uint64(m.Bytes()[8:])
	m.Release()
	if verdict != "ok" || int64(arrived) != tally.sends.Load() {
		t.Errorf("server: %s, %d of %d messages arrived", verdict, arrived, tally.sends.Load())
	}
	t.Logf("%s: %d operations by %d goroutines across processes, %d messages, %d CAS wins",
		mode, crossGoroutines*crossOps, crossGoroutines, tally.sends.Load(), tally.casWins.Load())
}

// TestIBVPeerKilled: a peer process killed with SIGKILL is noticed by an
// idle endpoint blocked in Recv, without any traffic, within
// killedNoticeBound: its kernel closes the handshake's TCP connection
// (tcp) or disconnects the rdma_cm connection (cm) for it; the endpoint's
// Done closes with ErrPeerLost, Recv returns it, and later operations fail
// instead of waiting.
func TestIBVPeerKilled(t *testing.T) {
	for _, mode := range []string{"tcp", "cm"} {
		t.Run(mode, func(t *testing.T) { testIBVPeerKilled(t, mode) })
	}
}

func testIBVPeerKilled(t *testing.T, mode string) {
	devA, devB := ibvDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startPeer(t, ctx, mode+"-hold "+devB)
	addr, br, stderr := srv.addr, srv.out, &srv.stderr
	rt, err := runtime.New(runtime.WithProvider(ibv.New()), runtime.WithDevice(devA), runtime.WithMemoryLimit(8<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	var cli *runtime.Endpoint
	if mode == "cm" {
		cli, err = rt.DialCM(ctx, addr)
	} else {
		cli, err = rt.Dial(ctx, addr)
	}
	if err != nil {
		t.Fatalf("dial %s (%s): %v; server stderr:\n%s", addr, mode, err, stderr.String())
	}
	defer cli.Close(context.Background())
	if line, err := br.ReadString('\n'); err != nil || line != "accepted\n" {
		t.Fatalf("server printed %q (%v)", line, err)
	}
	recvErr := make(chan error, 1)
	go func() {
		_, err := cli.Recv(ctx)
		recvErr <- err
	}()
	killed := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cli.Done():
		t.Logf("Done %v after SIGKILL: %v", time.Since(killed).Round(time.Millisecond), cli.Err())
	case <-time.After(killedNoticeBound):
		t.Fatalf("the endpoint did not notice its killed peer within %v", killedNoticeBound)
	}
	if !errors.Is(cli.Err(), runtime.ErrPeerLost) {
		t.Errorf("Err: %v, want ErrPeerLost", cli.Err())
	}
	if err := <-recvErr; !errors.Is(err, runtime.ErrPeerLost) {
		t.Errorf("Recv: %v, want ErrPeerLost", err)
	}
	buf, err := rt.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Send(ctx, buf.Slice(0, 8)).Wait(ctx); !errors.Is(err, runtime.ErrPeerLost) {
		t.Errorf("Send after the peer was lost: %v, want ErrPeerLost", err)
	}
}

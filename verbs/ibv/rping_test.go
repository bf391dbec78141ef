package ibv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// rping's protocol (librdmacm/examples/rping.c), per ping:
//
//	client: SEND {addr, rkey, len} of its source buffer   (16 bytes, big-endian)
//	server: RDMA READ it, then SEND a 16-byte "go ahead"
//	client: SEND {addr, rkey, len} of its sink buffer
//	server: RDMA WRITE what it read (strlen + 1 bytes) there, then "go ahead"
//
// The client checks (-V) that the sink holds what the source did; the
// server stops when the client disconnects.
const (
	rpingCount = 10
	// Offsets in a side's registered memory.
	rpingRecv  = 0    // 16-byte receive buffer
	rpingSend  = 64   // 16-byte send buffer
	rpingStart = 4096 // client's source
	rpingRDMA  = 8192 // server's read target / client's sink (up to 56 KiB)
	rpingMax   = 1<<16 - rpingRDMA
)

// rpingPath skips the test where rdmacm-utils' rping is not installed.
func rpingPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("rping")
	if err != nil {
		t.Skipf("rping not found (rdmacm-utils): %v", err)
	}
	return p
}

// runRping starts rping with args and returns a channel with its combined
// output and error once it exits.
func runRping(ctx context.Context, t *testing.T, args ...string) <-chan rpingResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, rpingPath(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Logf("rping %s", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		t.Fatalf("rping: %v", err)
	}
	res := make(chan rpingResult, 1)
	go func() {
		err := cmd.Wait()
		res <- rpingResult{out.String(), err}
	}()
	return res
}

type rpingResult struct {
	out string
	err error
}

// checkPings requires count lines prefix + the data of each ping, in order.
func checkPings(t *testing.T, out, prefix string, count, size int) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		want := string(rpingData(n, size)[:size-1])
		if got := strings.TrimPrefix(line, prefix); got != want {
			t.Errorf("ping %d: %q, want %q", n, got, want)
		}
		n++
	}
	if n != count {
		t.Errorf("%d lines %q, want %d:\n%s", n, prefix, count, out)
	}
}

// rpingWait polls cq for the next completion, giving up when the
// connection is gone or ctx ends. Send completions are skipped: they only
// say that an advertisement or a "go ahead" went out.
func rpingWait(ctx context.Context, cq verbs.CQ, conn *ibv.CMConn) (verbs.WC, error) {
	var wc [1]verbs.WC
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return verbs.WC{}, err
		}
		if n == 1 {
			if err := wc[0].Err(); err != nil {
				return wc[0], err
			}
			if wc[0].Opcode == verbs.WCSend {
				continue // a "go ahead" or buffer advertisement went out
			}
			return wc[0], nil
		}
		select {
		case <-conn.Disconnected():
			return verbs.WC{}, errDisconnected
		case <-ctx.Done():
			return verbs.WC{}, ctx.Err()
		default:
			time.Sleep(20 * time.Microsecond)
		}
	}
}

var errDisconnected = errors.New("the peer disconnected")

// TestRpingServer runs a Go rping server, over this provider and its
// rdma_cm API, against rdma-core's rping client (rxe0 -> rxe1):
// `rping -c -a B -I A -C 10 -S 100 -v -V`. The client validates that every
// ping came back; the server checks what it read.
func TestRpingServer(t *testing.T) {
	ipA, ipB, _, devB := cmAddrs(t)
	rpingPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const size = 100
	srv := open(t, "server", devB)
	qp := srv.newQP(verbs.QPTypeRC, nil)
	ln, err := ibv.ListenCM(netip.AddrPortFrom(ipB, 0).String())
	if err != nil {
		t.Fatalf("ListenCM: %v", err)
	}
	defer ln.Close()
	res := runRping(ctx, t, "-c", "-a", ipB.String(), "-I", ipA.String(),
		"-p", strconv.Itoa(int(ln.Addr().Port())), "-C", strconv.Itoa(rpingCount), "-S", strconv.Itoa(size), "-v", "-V")

	conn, err := ln.GetRequest(ctx)
	if err != nil {
		t.Fatalf("GetRequest: %v (rping: %v)", err, <-res)
	}
	defer conn.Close()
	if conn.Device() != devB.Name() {
		t.Fatalf("request on %s, want %s", conn.Device(), devB.Name())
	}
	if err := conn.InitQP(qp); err != nil {
		t.Fatalf("InitQP: %v", err)
	}
	recv := verbs.RecvWR{ID: 1, SGL: srv.sgl(rpingRecv, ibv.RemoteBufferLen)}
	postRecv(t, qp, recv)
	if err := conn.Accept(ctx, qp, ibv.ConnParam{ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	// One advertisement: a receive of 16 bytes, re-posted at once (before
	// the reply that lets the client send the next one).
	advert := func() (ibv.RemoteBuffer, error) {
		wc, err := rpingWait(ctx, srv.cq, conn)
		if err != nil {
			return ibv.RemoteBuffer{}, err
		}
		if wc.Opcode != verbs.WCRecv || wc.ByteLen != ibv.RemoteBufferLen {
			return ibv.RemoteBuffer{}, fmt.Errorf("received %+v, want a 16-byte buffer advertisement", wc)
		}
		var rb ibv.RemoteBuffer
		rb.UnmarshalBinary(srv.mem[rpingRecv:])
		postRecv(t, qp, recv)
		return rb, nil
	}
	goAhead := verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: srv.sgl(rpingSend, ibv.RemoteBufferLen)}
	pings := 0
	for ; ; pings++ {
		src, err := advert()
		if errors.Is(err, errDisconnected) {
			break // rping's server loop ends here too
		}
		if err != nil {
			t.Fatalf("ping %d: waiting for the source: %v", pings, err)
		}
		if src.Len == 0 || src.Len > rpingMax {
			t.Fatalf("ping %d: source of %d bytes", pings, src.Len)
		}
		post(t, qp, verbs.SendWR{ID: 3, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
			SGL: srv.sgl(rpingRDMA, int(src.Len)), RDMA: verbs.RDMA{RemoteAddr: src.Addr, RKey: src.RKey}})
		if wc, err := rpingWait(ctx, srv.cq, conn); err != nil || wc.Opcode != verbs.WCRDMARead {
			t.Fatalf("ping %d: RDMA READ: %+v, %v", pings, wc, err)
		}
		data := srv.mem[rpingRDMA : rpingRDMA+src.Len]
		if want := rpingData(pings, int(src.Len)); !bytes.Equal(data, want) {
			t.Errorf("ping %d: read %q, want %q", pings, data, want)
		}
		post(t, qp, goAhead)
		sink, err := advert()
		if err != nil {
			t.Fatalf("ping %d: waiting for the sink: %v", pings, err)
		}
		n := bytes.IndexByte(data, 0) + 1 // strlen + 1, as rping writes
		if n == 0 || uint32(n) > sink.Len {
			t.Fatalf("ping %d: %d bytes for a sink of %d", pings, n, sink.Len)
		}
		post(t, qp, verbs.SendWR{ID: 4, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: srv.sgl(rpingRDMA, n), RDMA: verbs.RDMA{RemoteAddr: sink.Addr, RKey: sink.RKey}})
		if wc, err := rpingWait(ctx, srv.cq, conn); err != nil || wc.Opcode != verbs.WCRDMAWrite {
			t.Fatalf("ping %d: RDMA WRITE: %+v, %v", pings, wc, err)
		}
		post(t, qp, goAhead)
	}
	if err := conn.Disconnect(); err != nil {
		t.Errorf("Disconnect: %v", err)
	}
	r := <-res
	t.Logf("rping client (%v):\n%s", r.err, r.out)
	if r.err != nil {
		t.Errorf("rping client failed: %v", r.err)
	}
	if pings != rpingCount {
		t.Errorf("served %d pings, want %d", pings, rpingCount)
	}
	checkPings(t, r.out, "ping data: ", rpingCount, size)
}

// TestRpingClient runs a Go rping client against rdma-core's rping server
// (`rping -s -a B -v`, rxe0 -> rxe1), checking every ping's echo as -V
// does; the server prints what it read.
func TestRpingClient(t *testing.T) {
	ipA, ipB, devA, _ := cmAddrs(t)
	rpingPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const size = 64 // rping's default
	cli := open(t, "client", devA)
	// A port of the dynamic range that nothing else here listens on.
	rport := 20000 + int(time.Now().UnixNano()%20000)
	res := runRping(ctx, t, "-s", "-a", ipB.String(), "-p", strconv.Itoa(rport), "-v")
	remote := netip.AddrPortFrom(ipB, uint16(rport)).String()

	// rping says nothing once it listens: connect until it stops rejecting.
	var conn *ibv.CMConn
	var qp verbs.QP
	for attempt := 1; ; attempt++ {
		c, err := ibv.DialCM(ctx, ipA.String(), remote)
		if err != nil {
			t.Fatalf("DialCM: %v", err)
		}
		q := cli.newQP(verbs.QPTypeRC, nil)
		if err := c.InitQP(q); err != nil {
			t.Fatalf("InitQP: %v", err)
		}
		postRecv(t, q, verbs.RecvWR{ID: 1, SGL: cli.sgl(rpingRecv, ibv.RemoteBufferLen)})
		err = c.Connect(ctx, q, ibv.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
		if err == nil {
			conn, qp = c, q
			t.Logf("connected at attempt %d", attempt)
			break
		}
		c.Close()
		q.Close()
		var ce *ibv.CMEventError
		if !errors.As(err, &ce) || ce.Event != ibv.CMRejected || attempt == 100 {
			t.Fatalf("Connect (attempt %d): %v", attempt, err)
		}
		select {
		case r := <-res:
			t.Fatalf("rping server exited: %v\n%s", r.err, r.out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer conn.Close()

	advertise := func(off int) {
		b := ibv.RemoteBuffer{Addr: cli.mr.Addr() + uint64(off), RKey: cli.mr.RKey(), Len: size}
		b.AppendBinary(cli.mem[rpingSend:rpingSend])
		post(t, qp, verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: cli.sgl(rpingSend, ibv.RemoteBufferLen)})
	}
	goAhead := func(ping int, what string) {
		wc, err := rpingWait(ctx, cli.cq, conn)
		if err != nil || wc.Opcode != verbs.WCRecv || wc.ByteLen != ibv.RemoteBufferLen {
			t.Fatalf("ping %d: waiting for the go-ahead after the %s: %+v, %v", ping, what, wc, err)
		}
		postRecv(t, qp, verbs.RecvWR{ID: 1, SGL: cli.sgl(rpingRecv, ibv.RemoteBufferLen)})
	}
	for ping := range rpingCount {
		data := rpingData(ping, size)
		copy(cli.mem[rpingStart:], data)
		clear(cli.mem[rpingRDMA : rpingRDMA+size])
		advertise(rpingStart)
		goAhead(ping, "source")
		advertise(rpingRDMA)
		goAhead(ping, "sink")
		if got := cli.mem[rpingRDMA : rpingRDMA+size]; !bytes.Equal(got, data) {
			t.Errorf("ping %d: echo %q, want %q", ping, got, data)
		}
	}
	if err := conn.Disconnect(); err != nil {
		t.Errorf("Disconnect: %v", err)
	}
	select { // rping's server answers the disconnect with its own
	case <-conn.Disconnected():
	case <-ctx.Done():
		t.Error("no reply to the disconnect")
	}
	r := <-res
	t.Logf("rping server (%v):\n%s", r.err, r.out)
	if r.err != nil {
		t.Errorf("rping server failed: %v", r.err)
	}
	checkPings(t, r.out, "server ping data: ", rpingCount, size)
}

package ibv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// cmAddrs returns the IPv4 addresses of devices A and B (rxe0 and rxe1 in
// the rxevm guest: 198.18.0.1 and .2), which rdma_cm resolves to them, and
// the devices. It skips where a device has no IPv4-mapped GID (rdma_cm
// needs an IP address on the device's netdev).
func cmAddrs(t *testing.T) (a, b netip.Addr, devA, devB verbs.Device) {
	t.Helper()
	devs := devices(t)
	devA, devB = devs[0], devs[0]
	if len(devs) > 1 {
		devB = devs[1]
	}
	ip := func(d verbs.Device) netip.Addr {
		ctx, err := d.Open()
		if err != nil {
			t.Fatalf("Open(%s): %v", d.Name(), err)
		}
		defer ctx.Close()
		pa, err := ctx.QueryPort(port)
		if err != nil {
			t.Fatalf("%s: QueryPort: %v", d.Name(), err)
		}
		_, g := pickGID(t, ctx, pa.GIDTblLen)
		a := netip.AddrFrom16(g)
		if !a.Is4In6() {
			t.Skipf("%s has no IPv4 GID for rdma_cm to resolve (GID %v)", d.Name(), g)
		}
		return a.Unmap()
	}
	return ip(devA), ip(devB), devA, devB
}

// cmEnd is one end of an rdma_cm test connection: a context opened on the
// connection's device, with a PD, a CQ, 64 KiB of registered memory and an
// RC QP in RESET.
type cmEnd struct {
	*side
	qp verbs.QP
}

func openCMEnd(t *testing.T, name string, conn *ibv.CMConn) *cmEnd {
	t.Helper()
	// The context through OpenContext, the rest as the other tests do.
	ctx, err := conn.OpenContext()
	if err != nil {
		t.Fatalf("%s: OpenContext(%s): %v", name, conn.Device(), err)
	}
	dev := ctx.Device()
	ctx.Close()
	s := open(t, name, dev)
	return &cmEnd{side: s, qp: s.newQP(verbs.QPTypeRC, nil)}
}

func (e *cmEnd) buf(off int) ibv.RemoteBuffer {
	return ibv.RemoteBuffer{Addr: e.mr.Addr() + uint64(off), RKey: e.mr.RKey(), Len: 4096}
}

func wire(t *testing.T, b ibv.RemoteBuffer) []byte {
	t.Helper()
	p, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCM connects two QPs through rdma_cm (rxe0 -> rxe1): each side's
// private data names a buffer of its own, which the other then WRITEs and
// READs; a SEND crosses too. Disconnect flushes and tells the peer. A
// second request is rejected, and a connect to a port nobody listens on
// fails with REJECTED.
func TestCM(t *testing.T) {
	ipA, ipB, _, devB := cmAddrs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := ibv.ListenCM(netip.AddrPortFrom(ipB, 0).String())
	if err != nil {
		t.Fatalf("ListenCM: %v", err)
	}
	defer ln.Close()
	if ln.Addr().Port() == 0 {
		t.Fatalf("listener bound to port 0")
	}
	t.Logf("listening on %v", ln.Addr())

	// The server's end is ready before the request comes: the goroutine
	// that takes it must not call t.Fatal.
	srv := &cmEnd{side: open(t, "server", devB)}
	srv.qp = srv.newQP(verbs.QPTypeRC, nil)
	type accepted struct {
		conn *ibv.CMConn
		peer ibv.RemoteBuffer
		err  error
	}
	acc := make(chan accepted, 1)
	go func() {
		req, err := ln.GetRequest(ctx)
		if err != nil {
			acc <- accepted{err: err}
			return
		}
		a := accepted{conn: req}
		switch {
		case req.Device() != devB.Name():
			a.err = fmt.Errorf("request on %s, want %s", req.Device(), devB.Name())
		case req.PeerParam().ResponderResources != 1 || req.PeerParam().InitiatorDepth != 1:
			a.err = fmt.Errorf("request's parameters %+v", req.PeerParam())
		}
		if a.err == nil {
			// The transport pads it: 56 bytes in a request on RoCE.
			t.Logf("the request's private data: %d bytes", len(req.PeerParam().PrivateData))
			a.err = a.peer.UnmarshalBinary(req.PeerParam().PrivateData)
		}
		if a.err == nil {
			a.err = req.InitQP(srv.qp)
		}
		if a.err == nil {
			_, a.err = srv.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: srv.sgl(8192, 64)}})
		}
		if a.err == nil {
			a.err = req.Accept(ctx, srv.qp, ibv.ConnParam{PrivateData: wire(t, srv.buf(0)),
				ResponderResources: 1, InitiatorDepth: 1})
		}
		acc <- a
	}()

	conn, err := ibv.DialCM(ctx, ipA.String(), ln.Addr().String())
	if err != nil {
		t.Fatalf("DialCM: %v", err)
	}
	defer conn.Close()
	t.Logf("resolved %v -> %v on %s port %d", conn.LocalAddr(), conn.RemoteAddr(), conn.Device(), conn.Port())
	if conn.LocalAddr().Addr() != ipA || conn.RemoteAddr() != ln.Addr() || conn.Port() != port {
		t.Errorf("addresses %v -> %v, port %d", conn.LocalAddr(), conn.RemoteAddr(), conn.Port())
	}
	cli := openCMEnd(t, "client", conn)
	copy(cli.mem[0:], "client's buffer")
	err = conn.Connect(ctx, cli.qp, ibv.ConnParam{PrivateData: wire(t, cli.buf(0)),
		ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	a := <-acc
	if a.conn != nil {
		defer a.conn.Close()
	}
	if err != nil || a.err != nil {
		t.Fatalf("Connect: %v; Accept: %v", err, a.err)
	}
	if a.peer != cli.buf(0) {
		t.Errorf("the request's private data: %+v, want %+v", a.peer, cli.buf(0))
	}
	if st := qpState(t, cli.qp); st != verbs.QPStateRTS {
		t.Errorf("client QP in %v after Connect", st)
	}
	if st := qpState(t, srv.qp); st != verbs.QPStateRTS {
		t.Errorf("server QP in %v after Accept", st)
	}
	var srvBuf ibv.RemoteBuffer
	t.Logf("the accept's private data: %d bytes", len(conn.PeerParam().PrivateData))
	if err := srvBuf.UnmarshalBinary(conn.PeerParam().PrivateData); err != nil || srvBuf != srv.buf(0) {
		t.Fatalf("the accept's private data: %+v, %v; want %+v", srvBuf, err, srv.buf(0))
	}

	// The client WRITEs into the buffer the accept named, the server READs
	// the one the request named.
	copy(cli.mem[100:], "written through rdma_cm")
	post(t, cli.qp, verbs.SendWR{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: cli.sgl(100, 23),
		RDMA: verbs.RDMA{RemoteAddr: srvBuf.Addr + 10, RKey: srvBuf.RKey}})
	waitOK(t, cli.cq, 1)
	if got := string(srv.mem[10:33]); got != "written through rdma_cm" {
		t.Errorf("server memory after WRITE: %q", got)
	}
	post(t, srv.qp, verbs.SendWR{ID: 3, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: srv.sgl(4096, 15),
		RDMA: verbs.RDMA{RemoteAddr: cli.buf(0).Addr, RKey: cli.buf(0).RKey}})
	waitOK(t, srv.cq, 1)
	if got := string(srv.mem[4096 : 4096+15]); got != "client's buffer" {
		t.Errorf("server READ %q", got)
	}
	copy(cli.mem[200:], "a message")
	post(t, cli.qp, verbs.SendWR{ID: 4, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: cli.sgl(200, 9)})
	waitOK(t, cli.cq, 1)
	if wc := waitOK(t, srv.cq, 1)[0]; wc.Opcode != verbs.WCRecv || string(srv.mem[8192:8192+wc.ByteLen]) != "a message" {
		t.Errorf("server received %+v: %q", wc, srv.mem[8192:8192+wc.ByteLen])
	}

	// A second request is rejected with private data.
	rej := make(chan error, 1)
	go func() {
		req, err := ln.GetRequest(ctx)
		if err != nil {
			rej <- err
			return
		}
		defer req.Close()
		rej <- req.Reject([]byte("go away"))
	}()
	conn2, err := ibv.DialCM(ctx, ipA.String(), ln.Addr().String())
	if err != nil {
		t.Fatalf("second DialCM: %v", err)
	}
	defer conn2.Close()
	qp2 := cli.newQP(verbs.QPTypeRC, nil)
	err = conn2.Connect(ctx, qp2, ibv.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	var ce *ibv.CMEventError
	if !errors.As(err, &ce) || ce.Event != ibv.CMRejected {
		t.Errorf("Connect to a rejecting server: %v, want a *CMEventError for REJECTED", err)
	} else {
		t.Logf("rejected: %v", err)
	}
	if err := <-rej; err != nil {
		t.Errorf("Reject: %v", err)
	}

	// The client disconnects: its posted receive flushes, the server
	// hears of it and answers with its own disconnect.
	postRecv(t, cli.qp, verbs.RecvWR{ID: 5, SGL: cli.sgl(300, 16)})
	if err := conn.Disconnect(); err != nil {
		t.Fatalf("client Disconnect: %v", err)
	}
	if wc := waitWCs(t, cli.cq, 1)[0]; wc.WRID != 5 || wc.Status != verbs.WCWRFlushErr {
		t.Errorf("client receive after Disconnect: %+v, want WR_FLUSH_ERR", wc)
	}
	select {
	case <-a.conn.Disconnected():
	case <-ctx.Done():
		t.Fatal("the server did not see the disconnect")
	}
	if err := a.conn.Disconnect(); err != nil {
		t.Errorf("server Disconnect: %v", err)
	}
	select {
	case <-conn.Disconnected():
	case <-ctx.Done():
		t.Fatal("the client did not see the server's reply")
	}

	// Nobody listens on the listener's port + 1 (probably): REJECTED.
	conn3, err := ibv.DialCM(ctx, ipA.String(), netip.AddrPortFrom(ipB, ln.Addr().Port()+1).String())
	if err != nil {
		t.Fatalf("third DialCM: %v", err)
	}
	defer conn3.Close()
	err = conn3.Connect(ctx, cli.newQP(verbs.QPTypeRC, nil), ibv.ConnParam{RetryCount: 7})
	if !errors.As(err, &ce) {
		t.Errorf("Connect to nobody: %v, want a *CMEventError", err)
	} else {
		t.Logf("no listener: %v", err)
	}
}

// TestCMBadInput: addresses that do not parse, a QP of another device, a
// connection used in the wrong order.
func TestCMBadInput(t *testing.T) {
	ipA, ipB, devA, devB := cmAddrs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, addr := range []string{"198.18.0.2", "nohost:1", "1.2.3.4:99999"} {
		if _, err := ibv.ListenCM(addr); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("ListenCM(%q): %v, want ErrInvalidArgument", addr, err)
		}
	}
	ln, err := ibv.ListenCM(netip.AddrPortFrom(ipB, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := ibv.DialCM(ctx, ipA.String(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Disconnect(); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("Disconnect before Connect: %v", err)
	}
	if err := conn.Accept(ctx, nil, ibv.ConnParam{}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("Accept of a nil QP: %v", err)
	}
	if devA.Name() != devB.Name() {
		other := open(t, "B", devB)
		if err := conn.Connect(ctx, other.newQP(verbs.QPTypeRC, nil), ibv.ConnParam{}); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("Connect with a QP of %s on a connection of %s: %v", devB.Name(), conn.Device(), err)
		}
	}
	own := open(t, "A", devA)
	if err := conn.Connect(ctx, own.newQP(verbs.QPTypeRC, nil), ibv.ConnParam{PrivateData: make([]byte, 300)}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("Connect with 300 bytes of private data: %v", err)
	}
	// A GetRequest that nobody answers ends with its context; Close wakes
	// another.
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if _, err := ln.GetRequest(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetRequest with nobody connecting: %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ln.GetRequest(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	if err := <-done; !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("GetRequest during Close: %v, want ErrClosed", err)
	}
}

func qpState(t *testing.T, q verbs.QP) verbs.QPState {
	t.Helper()
	a, err := q.Query()
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	return a.State
}

// rpingData is what rping's client puts in its buffer for ping number
// ping (rping_test_client): "rdma-ping-%d: ", then letters from 'A' + ping
// (mod 58) cycling through 'A'..'z', and a NUL at the end.
func rpingData(ping, size int) []byte {
	b := make([]byte, size)
	cc := copy(b, fmt.Sprintf("rdma-ping-%d: ", ping))
	c := byte(65 + ping%58)
	for i := cc; i < size; i++ {
		b[i] = c
		c++
		if c > 122 {
			c = 65
		}
	}
	b[size-1] = 0
	return b
}

func TestRpingData(t *testing.T) {
	b := rpingData(57, 20)
	if want := "rdma-ping-57: zABCD\x00"; string(b) != want {
		t.Errorf("rpingData(57, 20) = %q, want %q", b, want)
	}
	if !bytes.HasPrefix(rpingData(58, 20)[14:], []byte("ABC")) {
		t.Errorf("ping 58 starts over at 'A': %q", rpingData(58, 20))
	}
}

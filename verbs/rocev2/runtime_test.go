package rocev2_test

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

// TestRuntimeOverRoCEv2 runs two runtimes of one process over the
// provider, one on each device (two sockets on ::1), connects them with
// runtime.Pipe (the runtime's TCP handshake of QPN, PSN and GID) and
// checks that an RDMA WRITE lands in the memory the server exposed and
// that a SEND arrives as a message, both ways.
func TestRuntimeOverRoCEv2(t *testing.T) {
	p := newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a way out, not a measurement
	defer cancel()
	client, server := newDeviceRuntime(t, p, "rocev2_0"), newDeviceRuntime(t, p, "rocev2_1")
	cli, srv := pipe(t, ctx, client, server)

	// WRITE 5000 bytes (five packets at the runtime's path MTU) into
	// exposed server memory.
	target, err := server.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := target.Expose(runtime.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	src, err := client.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	copy(src.Bytes(), data)
	c, err := cli.Write(ctx, src.Slice(0, len(data)), exp.RemoteRef()).Wait(ctx)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if c.ByteLen != uint32(len(data)) {
		t.Fatalf("Write completed %d bytes, want %d", c.ByteLen, len(data))
	}
	if !bytes.Equal(target.Bytes()[:len(data)], data) {
		t.Fatal("the server's memory does not hold what the client wrote")
	}

	exchange(t, ctx, cli, srv)
}

// exchange SENDs a message from cli to srv and one back, and checks what
// each side receives.
func exchange(t *testing.T, ctx context.Context, cli, srv *runtime.Endpoint) {
	t.Helper()
	for _, dir := range []struct {
		name     string
		from, to *runtime.Endpoint
		msg      string
	}{
		{"client to server", cli, srv, "request over RoCE v2"},
		{"server to client", srv, cli, "reply over RoCE v2"},
	} {
		if _, err := dir.from.SendBytes(ctx, []byte(dir.msg)).Wait(ctx); err != nil {
			t.Fatalf("%s: Send: %v", dir.name, err)
		}
		m, err := dir.to.Recv(ctx)
		if err != nil {
			t.Fatalf("%s: Recv: %v", dir.name, err)
		}
		if got := string(m.Bytes()); got != dir.msg {
			t.Errorf("%s: received %q, want %q", dir.name, got, dir.msg)
		}
		m.Release()
	}
}

// TestRuntimeAcrossProviders connects runtimes on two providers, each with
// a socket on a port of its own, as two processes of one host are: only
// the LID that the runtime's hello carries (the port's UDP port) tells
// each where the other's packets go.
func TestRuntimeAcrossProviders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a way out, not a measurement
	defer cancel()
	client, server := newLoopbackRuntime(t), newLoopbackRuntime(t)
	cli, srv := pipe(t, ctx, client, server)
	exchange(t, ctx, cli, srv)
}

// TestRuntimeHearsOnlyItsPeer sends the server endpoint of a runtime
// pair over rocev2, from a stranger's socket on ::1, SENDs at the PSN it
// expects (a zeroed runtime header, which the runtime would deliver as an
// empty message, and garbage, which would end the endpoint), a WRITE of
// length 0 there (which would make the client's next message a
// duplicate, acknowledged and lost) and a WRITE through a wrong key
// (which would fail the QP). Recv then gets the client's messages and
// nothing else, and the endpoint stays up.
func TestRuntimeHearsOnlyItsPeer(t *testing.T) {
	p := newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a way out, not a measurement
	defer cancel()
	cli, srv := pipe(t, ctx, newDeviceRuntime(t, p, "rocev2_0"), newDeviceRuntime(t, p, "rocev2_1"))
	qpn := srv.LocalAddr().(runtime.Addr).QPN
	psn, ok := p.ExpectedPSN(1, qpn)
	if !ok {
		t.Fatalf("no RC QP %#x on rocev2_1", qpn)
	}
	conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	from := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	to := p.Transport(1).LocalAddr()
	before := p.Transport(1).Stats().NotPeer
	forged := []wire.Packet{
		{BTH: wire.BTH{Opcode: wire.RCSendOnly, PSN: psn}, Payload: make([]byte, 8)},
		{BTH: wire.BTH{Opcode: wire.RCSendOnly, PSN: psn}, Payload: []byte("garbage header and more")},
		{BTH: wire.BTH{Opcode: wire.RCWriteOnly, PSN: psn}, RETH: wire.RETH{RKey: 0x1234}},
		{BTH: wire.BTH{Opcode: wire.RCWriteOnly, PSN: psn}, RETH: wire.RETH{RKey: 0x1234, DMALen: 4}, Payload: []byte("evil")},
	}
	for i := range forged {
		pk := &forged[i]
		pk.BTH.DestQP, pk.BTH.PKey = qpn, wire.DefaultPKey
		b, err := pk.Append(nil, &wire.IPHeader{Src: from.Addr(), Dst: to.Addr(), SrcPort: from.Port(), DstPort: to.Port()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteToUDPAddrPort(b, to); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); p.Transport(1).Stats().NotPeer-before < uint64(len(forged)); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's transport dropped %d of the stranger's %d datagrams: %+v",
				p.Transport(1).Stats().NotPeer-before, len(forged), p.Transport(1).Stats())
		}
	}
	exchange(t, ctx, cli, srv)
	select {
	case <-srv.Done():
		t.Fatalf("the server endpoint ended: %v", srv.Err())
	default:
	}
}

package ibv_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

// What ibv_rc_pingpong's sprintf("%04x:%06x:%06x:%s") and gid_to_wire_gid
// produce for rxe0 in the rxevm guest, NUL-terminated.
const wireRxe0 = "0000:000011:abcdef:00000000000000000000ffffc6120001\x00"

var destRxe0 = verbs.PeerInfo{QPN: 0x11, PSN: 0xabcdef,
	GID: verbs.GIDFromAddr(netip.MustParseAddr("198.18.0.1"))}

func TestMarshalDest(t *testing.T) {
	if ibv.DestLen != 52 {
		t.Errorf("DestLen = %d, want 52 (sizeof the C message buffer)", ibv.DestLen)
	}
	msg := ibv.MarshalDest(destRxe0)
	if string(msg[:]) != wireRxe0 {
		t.Errorf("MarshalDest = %q, want %q", msg, wireRxe0)
	}
	// An InfiniBand port: LID set, link-local GID.
	ib := verbs.PeerInfo{LID: 0x1f, QPN: 0xffffff, PSN: 1,
		GID: verbs.GIDFromAddr(netip.MustParseAddr("fe80::2:c903:f:1b41"))}
	msg = ibv.MarshalDest(ib)
	if want := "001f:ffffff:000001:fe800000000000000002c903000f1b41\x00"; string(msg[:]) != want {
		t.Errorf("MarshalDest = %q, want %q", msg, want)
	}
}

func TestUnmarshalDest(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      verbs.PeerInfo
		err       bool
	}{
		{name: "rxe0", msg: wireRxe0, want: destRxe0},
		{name: "no NUL", msg: wireRxe0[:51], want: destRxe0},
		{name: "upper case", msg: "0000:000011:ABCDEF:00000000000000000000FFFFC6120001", want: destRxe0},
		{name: "garbage after NUL", msg: wireRxe0[:51] + "\x00xyz", want: destRxe0},
		{name: "three fields", msg: "0000:000011:abcdef", err: true},
		{name: "short GID", msg: "0000:000011:abcdef:00ff", err: true},
		{name: "GID not hex", msg: "0000:000011:abcdef:0000000000000000000000000000000g", err: true},
		{name: "QPN too wide", msg: "0000:1000000:abcdef:00000000000000000000ffffc6120001", err: true},
		{name: "LID not hex", msg: "zz:000011:abcdef:00000000000000000000ffffc6120001", err: true},
		{name: "empty", msg: "", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ibv.UnmarshalDest([]byte(tc.msg))
			if tc.err {
				if !errors.Is(err, ibv.ErrProtocol) {
					t.Errorf("UnmarshalDest(%q) = %+v, %v; want an error matching ErrProtocol", tc.msg, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("UnmarshalDest(%q) = %+v, %v; want %+v", tc.msg, got, err, tc.want)
			}
		})
	}
}

func FuzzUnmarshalDest(f *testing.F) {
	f.Add([]byte(wireRxe0))
	f.Add([]byte("001f:ffffff:000001:fe800000000000000002c903000f1b41"))
	f.Add([]byte("::::"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		p, err := ibv.UnmarshalDest(msg)
		if err != nil {
			if !errors.Is(err, ibv.ErrProtocol) {
				t.Fatalf("error %v does not match ErrProtocol", err)
			}
			return
		}
		// Whatever parses renders back to a message that parses the same.
		again := ibv.MarshalDest(p)
		q, err := ibv.UnmarshalDest(again[:])
		if err != nil || q != p {
			t.Fatalf("%+v -> %q -> %+v, %v", p, again, q, err)
		}
	})
}

// TestExchangeDest runs both halves of the ibv_rc_pingpong exchange over
// TCP on the loopback: the server connects its QP (the callback) before it
// answers, and the client writes "done" at the end.
func TestExchangeDest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := verbs.PeerInfo{QPN: 0x12, PSN: 0x123456, GID: verbs.GIDFromAddr(netip.MustParseAddr("198.18.0.2"))}
	var connected atomic.Bool
	type result struct {
		p   verbs.PeerInfo
		err error
	}
	srv := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srv <- result{err: err}
			return
		}
		defer c.Close()
		p, err := ibv.ServerExchangeDest(ctx, c, destRxe0, func(remote verbs.PeerInfo) error {
			if remote != client {
				return errors.New("connect called with the wrong peer")
			}
			connected.Store(true)
			return nil
		})
		srv <- result{p, err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := ibv.ClientExchangeDest(ctx, c, client)
	if err != nil || got != destRxe0 {
		t.Fatalf("client got %+v, %v; want %+v", got, err, destRxe0)
	}
	if !connected.Load() {
		t.Error("the server answered before connecting its QP")
	}
	if r := <-srv; r.err != nil || r.p != client {
		t.Fatalf("server got %+v, %v; want %+v", r.p, r.err, client)
	}
}

// TestExchangeDestRaw plays ibv_rc_pingpong's client byte for byte against
// ServerExchangeDest, and a server that answers garbage against
// ClientExchangeDest.
func TestExchangeDestRaw(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		_, err := ibv.ServerExchangeDest(ctx, a, destRxe0, func(verbs.PeerInfo) error { return nil })
		done <- err
	}()
	io.WriteString(b, "0000:000012:123456:00000000000000000000ffffc6120002\x00")
	var reply [ibv.DestLen]byte
	if _, err := io.ReadFull(b, reply[:]); err != nil || string(reply[:]) != wireRxe0 {
		t.Fatalf("server replied %q, %v", reply, err)
	}
	io.WriteString(b, "done\x00")
	if err := <-done; err != nil {
		t.Fatalf("ServerExchangeDest: %v", err)
	}

	c, d := net.Pipe()
	defer c.Close()
	defer d.Close()
	go func() {
		var in [ibv.DestLen]byte
		io.ReadFull(d, in[:])
		d.Write(make([]byte, ibv.DestLen)) // all NULs
		io.ReadFull(d, in[:5])
	}()
	if _, err := ibv.ClientExchangeDest(ctx, c, destRxe0); !errors.Is(err, ibv.ErrProtocol) {
		t.Errorf("ClientExchangeDest with a garbage reply: %v, want ErrProtocol", err)
	}
	// A context that ends stops a stalled exchange.
	e, f := net.Pipe()
	defer e.Close()
	defer f.Close()
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	go io.Copy(io.Discard, f)
	if _, err := ibv.ClientExchangeDest(short, e, destRxe0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stalled exchange: %v, want DeadlineExceeded", err)
	}
}

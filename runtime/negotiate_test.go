package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// qpAttr queries the QP of ep.
func qpAttr(t *testing.T, ep *runtime.Endpoint) verbs.QPAttr {
	t.Helper()
	a, err := ep.QP().Query()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// exchange carries a 64 KiB message each way between a and b by SEND,
// and a 64 KiB WRITE each way, every byte checked: each is larger than
// either port's MTU, so it travels as many packets of the path MTU.
func exchange(t *testing.T, a, b *runtime.Endpoint) {
	t.Helper()
	ctx := ctxT(t)
	const n = 64 << 10
	for i, dir := range [][2]*runtime.Endpoint{{a, b}, {b, a}} {
		msg := make([]byte, n)
		for k := range msg {
			msg[k] = byte(k*7 + i)
		}
		if _, err := dir[0].SendBytes(ctx, msg).Wait(ctx); err != nil {
			t.Fatalf("SEND of %d bytes: %v", n, err)
		}
		m, err := dir[1].Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Bytes(), msg) {
			t.Errorf("direction %d: the %d bytes received differ from those sent", i, len(m.Bytes()))
		}
		m.Release()
		src, dst := alloc(t, dir[0].Runtime(), n), alloc(t, dir[1].Runtime(), n)
		copy(src.Bytes(), msg)
		if _, err := dir[0].Write(ctx, src.Local(), refOf(t, dst)).Wait(ctx); err != nil {
			t.Fatalf("WRITE of %d bytes: %v", n, err)
		}
		if !bytes.Equal(dst.Bytes(), msg) {
			t.Errorf("direction %d: the %d bytes written differ", i, n)
		}
	}
}

// TestMTUNegotiated: runtimes on ports of MTU 1024 and 4096 connect,
// whichever dials, at path MTU 1024 on both QPs, and carry 64 KiB each
// way. A QP at 4096 towards the 1024 port would have its packets dropped
// there (the soft device drops them as a NIC does) and fail with
// RETRY_EXC_ERR.
func TestMTUNegotiated(t *testing.T) {
	port := func(mtu int) soft.DeviceModel {
		return soft.DeviceModel{Ports: []soft.PortModel{{ActiveMTU: mtu}}}
	}
	fabric := soft.New(soft.Config{Models: []soft.DeviceModel{port(1024), port(4096)}})
	t.Cleanup(func() { fabric.Close() })
	opts := []runtime.Option{runtime.WithProvider(fabric), runtime.WithMessageSize(64 << 10)}
	small := newRuntime(t, append(opts, runtime.WithDevice("soft0"))...)
	large := newRuntime(t, append(opts, runtime.WithDevice("soft1"))...)
	if s, l := small.Stats().MTU, large.Stats().MTU; s != 1024 || l != 4096 {
		t.Fatalf("port MTUs %d and %d, want 1024 and 4096", s, l)
	}
	for _, c := range []struct {
		name     string
		dialer   *runtime.Runtime
		listener *runtime.Runtime
	}{{"the 1024 side dials", small, large}, {"the 4096 side dials", large, small}} {
		t.Run(c.name, func(t *testing.T) {
			cli, srv := connectRuntimes(t, c.dialer, c.listener)
			defer cli.Close(context.Background())
			defer srv.Close(context.Background())
			for _, ep := range []*runtime.Endpoint{cli, srv} {
				if a := qpAttr(t, ep); a.PathMTU != verbs.MTU1024 {
					t.Errorf("%s's QP: path MTU %s, want 1024", ep.Runtime().Stats().Device, a.PathMTU)
				}
			}
			exchange(t, cli, srv)
		})
	}
}

// ibModel is a device of two InfiniBand ports, LIDs lid and lid+1, each
// with its port GID at index 0 in the subnet prefix fe80::/64 or, when
// prefix is not 0, in fec0:0:0:prefix::/64.
func ibModel(lid uint16, prefix byte) soft.DeviceModel {
	port := func(lid uint16) soft.PortModel {
		g := verbs.GID{0xfe, 0x80, 15: byte(lid)}
		if prefix != 0 {
			g = verbs.GID{0xfe, 0xc0, 7: prefix, 15: byte(lid)}
		}
		return soft.PortModel{LinkLayer: verbs.LinkLayerInfiniBand, LID: lid,
			GIDs: []verbs.GIDEntry{{GID: g, Type: verbs.GIDTypeIB}}}
	}
	return soft.DeviceModel{Ports: []soft.PortModel{port(lid), port(lid + 1)}}
}

// TestInfiniBandByLID: runtimes on InfiniBand ports of one subnet connect
// by LID: each QP's address vector has no global route and its DLID is
// the peer port's LID, and data flows both ways (the soft device routes
// such a vector by its DLID alone, to the port with that LID). On port 2
// as on port 1. Peers of different subnet prefixes keep the global route.
func TestInfiniBandByLID(t *testing.T) {
	for _, c := range []struct {
		name           string
		prefixA        byte
		prefixB        byte
		port           string
		lidA, lidB     uint16
		wantGlobal     bool
		wantPortNumber uint8
	}{
		{"one subnet, port 1", 0, 0, "1", 1, 11, false, 1},
		{"one subnet, port 2", 0, 0, "2", 2, 12, false, 2},
		{"two subnets", 1, 2, "1", 1, 11, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			fabric := soft.New(soft.Config{Models: []soft.DeviceModel{ibModel(1, c.prefixA), ibModel(11, c.prefixB)}})
			t.Cleanup(func() { fabric.Close() })
			opts := []runtime.Option{runtime.WithProvider(fabric), runtime.WithMessageSize(64 << 10)}
			rtA := newRuntime(t, append(opts, runtime.WithDevice("soft0:"+c.port))...)
			rtB := newRuntime(t, append(opts, runtime.WithDevice("soft1:"+c.port))...)
			if s := rtA.Stats(); s.LinkLayer != verbs.LinkLayerInfiniBand || s.Port != c.wantPortNumber {
				t.Fatalf("chose %s port %d, want InfiniBand port %d", s.LinkLayer, s.Port, c.wantPortNumber)
			}
			a, b := connectRuntimes(t, rtA, rtB)
			defer a.Close(context.Background())
			defer b.Close(context.Background())
			for _, e := range []struct {
				ep      *runtime.Endpoint
				peerLID uint16
			}{{a, c.lidB}, {b, c.lidA}} {
				av := qpAttr(t, e.ep).AH
				if av.IsGlobal != c.wantGlobal || av.DLID != e.peerLID || av.PortNum != c.wantPortNumber {
					t.Errorf("%s's address vector: is_global %v, DLID %d, port %d; want is_global %v, DLID %d, port %d",
						e.ep.Runtime().Stats().Device, av.IsGlobal, av.DLID, av.PortNum, c.wantGlobal, e.peerLID, c.wantPortNumber)
				}
			}
			exchange(t, a, b)
		})
	}
}

// TestRdAtomicNegotiated: a device that takes only 4 READs and atomics at
// once as responder connects to one that takes 16: its QP accepts 4 and
// initiates 16, the peer's QP initiates at most 4, and READs and atomics
// work both ways. Asking the device for 16 as responder fails the QP's
// move to RTR (EINVAL), as on hardware.
func TestRdAtomicNegotiated(t *testing.T) {
	fabric := soft.New(soft.Config{Models: []soft.DeviceModel{{MaxQPRdAtom: 4}, {}}})
	t.Cleanup(func() { fabric.Close() })
	low := newRuntime(t, runtime.WithProvider(fabric), runtime.WithDevice("soft0"))
	high := newRuntime(t, runtime.WithProvider(fabric), runtime.WithDevice("soft1"))
	for _, c := range []struct {
		name             string
		dialer, listener *runtime.Runtime
	}{{"the shallow side dials", low, high}, {"the deep side dials", high, low}} {
		t.Run(c.name, func(t *testing.T) {
			cli, srv := connectRuntimes(t, c.dialer, c.listener)
			defer cli.Close(context.Background())
			defer srv.Close(context.Background())
			lowEP, highEP := cli, srv
			if c.dialer == high {
				lowEP, highEP = srv, cli
			}
			if a := qpAttr(t, lowEP); a.MaxDestRdAtomic != 4 || a.MaxRdAtomic != 16 {
				t.Errorf("shallow side: max_dest_rd_atomic %d, max_rd_atomic %d; want 4 and 16", a.MaxDestRdAtomic, a.MaxRdAtomic)
			}
			if a := qpAttr(t, highEP); a.MaxRdAtomic != 4 || a.MaxDestRdAtomic != 16 {
				t.Errorf("deep side: max_rd_atomic %d, max_dest_rd_atomic %d; want 4 and 16", a.MaxRdAtomic, a.MaxDestRdAtomic)
			}
			ctx := ctxT(t)
			for _, dir := range [][2]*runtime.Endpoint{{lowEP, highEP}, {highEP, lowEP}} {
				remote, local := alloc(t, dir[1].Runtime(), 4096), alloc(t, dir[0].Runtime(), 4096)
				copy(remote.Bytes(), "read me")
				fs := make([]runtime.Future, 8) // more than the shallow side takes at once
				for i := range fs {
					fs[i] = dir[0].Read(ctx, local.Local(), refOf(t, remote))
				}
				for _, f := range fs {
					if _, err := f.Wait(ctx); err != nil {
						t.Fatalf("READ: %v", err)
					}
				}
				if got := string(local.Bytes()[:7]); got != "read me" {
					t.Errorf("READ brought %q", got)
				}
			}
		})
	}
}

// TestOlderPeerRefused: a peer that speaks version 3 of the handshake is
// refused with an error that names both versions, whichever side it is:
// a listener tells a version-3 client so in its refusal, and Dial to a
// version-3 listener fails with ErrProtocol saying so.
func TestOlderPeerRefused(t *testing.T) {
	const v3 = `{"version":3,"qpn":17,"psn":0,"lid":0,"gid":"::ffff:10.99.0.1","recv_depth":64,"window":3,"msg_size":4096}` + "\n"
	rt := newRuntime(t)
	ctx := ctxT(t)
	wantText := func(where, text string) {
		t.Helper()
		for _, s := range []string{"version 3", "version 4", "older"} {
			if !strings.Contains(text, s) {
				t.Errorf("%s: %q lacks %q", where, text, s)
			}
		}
	}

	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	old, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	old.SetDeadline(time.Now().Add(10 * time.Second))
	old.Write([]byte(v3))
	line, err := bufio.NewReader(old).ReadString('\n')
	old.Close()
	var refusal struct{ Error, Cause string }
	if err != nil || json.Unmarshal([]byte(line), &refusal) != nil || refusal.Cause != "protocol" {
		t.Fatalf("the listener answered a version-3 hello with %q, %v; want a refusal with cause protocol", line, err)
	}
	wantText("the listener's refusal", refusal.Error)

	oldLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer oldLn.Close()
	go func() {
		c, err := oldLn.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := bufio.NewReader(c).ReadString('\n'); err == nil { // the dialer's hello
			c.Write([]byte(v3))
			bufio.NewReader(c).ReadString('\n') // its refusal, until it hangs up
		}
	}()
	ep, err := rt.Dial(ctx, oldLn.Addr().String())
	if err == nil {
		ep.Close(ctx)
		t.Fatal("Dial to a version-3 listener succeeded")
	}
	if !errors.Is(err, runtime.ErrProtocol) {
		t.Errorf("Dial to a version-3 listener: %v, want ErrProtocol", err)
	}
	wantText("Dial's error", err.Error())
}

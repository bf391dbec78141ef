package ibv_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

func TestProvider(t *testing.T) {
	p := ibv.New()
	if p.Name() != "ibv" {
		t.Errorf("Name() = %q, want ibv", p.Name())
	}
	devs, err := p.Devices()
	if err != nil {
		// A host without RDMA support: the error must say so in verbs terms.
		if !errors.Is(err, verbs.ErrNotSupported) {
			t.Errorf("Devices: %v, want an error matching verbs.ErrNotSupported", err)
		}
		t.Skipf("no RDMA device (%v): run through verbs/ibv/rxevm/run", err)
	}
	for _, d := range devs {
		t.Logf("device %s guid %016x", d.Name(), d.GUID())
	}
}

// TestQuery: device, port and GID queries on every device, rxe's facts where
// the device is rxe in the rxevm guest.
func TestQuery(t *testing.T) {
	for _, dev := range devices(t) {
		ctx, err := dev.Open()
		if err != nil {
			t.Fatalf("Open(%s): %v", dev.Name(), err)
		}
		defer ctx.Close()
		if ctx.Device().Name() != dev.Name() {
			t.Errorf("Device().Name() = %q, want %q", ctx.Device().Name(), dev.Name())
		}
		da, err := ctx.QueryDevice()
		if err != nil {
			t.Fatalf("%s: QueryDevice: %v", dev.Name(), err)
		}
		if da.MaxQP <= 0 || da.MaxQPWR <= 0 || da.MaxCQE <= 0 || da.MaxSGE <= 0 || da.PhysPortCnt < 1 {
			t.Errorf("%s: QueryDevice = %+v", dev.Name(), da)
		}
		if da.NodeGUID != dev.GUID() {
			t.Errorf("%s: node_guid %016x, device GUID %016x", dev.Name(), da.NodeGUID, dev.GUID())
		}
		pa, err := ctx.QueryPort(port)
		if err != nil {
			t.Fatalf("%s: QueryPort: %v", dev.Name(), err)
		}
		if pa.State != verbs.PortActive || pa.GIDTblLen <= 0 || pa.ActiveMTU.Bytes() == 0 {
			t.Errorf("%s: QueryPort = %+v", dev.Name(), pa)
		}
		_, err = ctx.QueryPort(uint8(da.PhysPortCnt + 1))
		wantErr(t, "QueryPort past the last port", err, verbs.ErrNotFound)
		_, err = ctx.QueryGID(port, pa.GIDTblLen)
		wantErr(t, "QueryGID past the table", err, verbs.ErrNotFound)
		t.Logf("%s: fw %q max_qp %d max_qp_wr %d max_sge %d max_cqe %d atomic %v caps %#x; port %v %v mtu %v/%v gids %d",
			dev.Name(), da.FWVer, da.MaxQP, da.MaxQPWR, da.MaxSGE, da.MaxCQE, da.AtomicCap,
			uint64(da.DeviceCapFlags), pa.State, pa.LinkLayer, pa.ActiveMTU, pa.MaxMTU, pa.GIDTblLen)

		// rxevm: rxe0 on 198.18.0.1, rxe1 on .2, GID 1 the IPv4-mapped one.
		want := map[string]string{"rxe0": "198.18.0.1", "rxe1": "198.18.0.2"}[dev.Name()]
		if want == "" {
			continue
		}
		g, err := ctx.QueryGID(port, 1)
		if err != nil {
			t.Fatalf("%s: QueryGID(1, 1): %v", dev.Name(), err)
		}
		if g != verbs.GIDFromAddr(netip.MustParseAddr(want)) {
			t.Errorf("%s: GID 1 = %v, want ::ffff:%s", dev.Name(), g, want)
		}
		if pa.LinkLayer != verbs.LinkLayerEthernet || pa.ActiveMTU != verbs.MTU1024 {
			t.Errorf("%s: link layer %v active MTU %v, want Ethernet 1024", dev.Name(), pa.LinkLayer, pa.ActiveMTU)
		}
		if da.DeviceCapFlags&verbs.DeviceXRC != 0 {
			t.Errorf("%s: rxe reports XRC", dev.Name())
		}
	}
}

// TestClose: Context.Close destroys what is still open, ends AsyncEvents,
// stops its goroutine and leaves the objects answering ErrClosed.
func TestClose(t *testing.T) {
	devs := devices(t)
	ctx, err := devs[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(verbs.CQSpec{CQE: 8})
	ch, _ := ctx.CreateCompChannel()
	if pd == nil || cq == nil || ch == nil {
		t.Fatal("creating objects failed")
	}
	q, err := pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Caps: qpCaps})
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); !errors.Is(err, verbs.ErrBusy) {
		t.Errorf("closing a PD with a QP: %v, want ErrBusy", err)
	}
	// A waiter on the channel is woken by the close.
	waiting := make(chan error, 1)
	go func() {
		_, err := ch.GetCQEvent(context.Background())
		waiting <- err
	}()
	if err := ctx.Close(); err != nil {
		t.Fatalf("Context.Close: %v", err)
	}
	select {
	case err := <-waiting:
		wantErr(t, "GetCQEvent across Close", err, verbs.ErrClosed)
	case <-time.After(waitFor):
		t.Fatal("GetCQEvent still waiting after Context.Close")
	}
	if _, ok := <-ctx.AsyncEvents(); ok {
		t.Error("AsyncEvents still open after Close")
	}
	_, err = q.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}})
	wantErr(t, "PostSend after Close", err, verbs.ErrClosed)
	_, err = cq.Poll(make([]verbs.WC, 1))
	wantErr(t, "Poll after Close", err, verbs.ErrClosed)
	_, err = ctx.AllocPD()
	wantErr(t, "AllocPD after Close", err, verbs.ErrClosed)
	if err := q.Close(); err != nil {
		t.Errorf("QP Close after Context.Close: %v, want nil (already destroyed)", err)
	}
	if err := ctx.Close(); err != nil {
		t.Errorf("second Context.Close: %v", err)
	}
	goleak.VerifyNone(t)
}

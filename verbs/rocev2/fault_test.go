package rocev2

import (
	"bytes"
	"errors"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestInboundFaults checks each action InjectInbound takes on chosen
// received packets, before the Receiver sees them, and that the actions
// that would hold a packet are refused.
func TestInboundFaults(t *testing.T) {
	a, b := listenPair(t, NewManualClock())
	r := newRecorder()
	b.Register(1, r, AnySource)
	is := func(psn wire.PSN) func(*wire.Packet) bool {
		return func(p *wire.Packet) bool { return p.BTH.PSN == psn }
	}
	hits := make(chan wire.Packet, 8)
	hit := func(p wire.Packet) { hits <- p }
	for _, f := range []Fault{
		{Action: FaultDrop, Match: is(1), Hit: hit},
		{Action: FaultDuplicate, Match: is(2)},
		{Action: FaultCorrupt, Match: is(3)},
		{Action: FaultObserve, Match: is(4), Hit: hit},
	} {
		if err := b.InjectInbound(f); err != nil {
			t.Fatalf("%v: %v", f.Action, err)
		}
	}
	for _, act := range []FaultAction{FaultReorder, FaultDelay} {
		if err := b.InjectInbound(Fault{Action: act}); !errors.Is(err, ErrNotSupported) {
			t.Errorf("inbound action %d: %v, want ErrNotSupported", act, err)
		}
	}
	for psn := range wire.PSN(6) {
		if err := a.Send(b.LocalAddr(), sendOnly(psn, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// 1 is lost, 2 arrives twice, 3 counts as a bad ICRC, 4 passes.
	r.wait(t, 5)
	if got, want := r.psns(), []wire.PSN{0, 2, 2, 4, 5}; !equalPSNs(got, want) {
		t.Fatalf("received %v, want %v", got, want)
	}
	if p := next(t, hits); p.BTH.PSN != 1 {
		t.Fatalf("first hit on %v", &p)
	}
	if p := next(t, hits); p.BTH.PSN != 4 {
		t.Fatalf("second hit on %v", &p)
	}
	// The duplicate counts in Received twice, as a sent one does in Sent.
	if s := b.Stats(); s.Faulted != 4 || s.BadICRC != 1 || s.Received != 5 {
		t.Fatalf("receiver stats %+v", s)
	}
	if s := a.Stats(); s.Faulted != 0 || s.Sent != 6 {
		t.Fatalf("sender stats %+v", s)
	}
	// The rules are spent: the same PSNs now pass.
	a.Send(b.LocalAddr(), sendOnly(1, 1))
	r.wait(t, 1)
	b.ClearFaults()
}

// TestRCInboundLostRequest loses a middle packet of a SEND as the
// responder receives it: the responder NAKs the gap (PSN sequence error)
// and the requester goes back to it, without a timeout. This is what a
// responder's own fault injection asks of a peer (rxe) as the requester.
func TestRCInboundLostRequest(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	start := wire.PSN(0xfffffe)
	if err := p.tb.InjectInbound(Fault{Action: FaultDrop, Match: isPSN(start.Add(1)), Hit: p.hit}); err != nil {
		t.Fatal(err)
	}
	naks := make(chan wire.Packet, 16)
	p.tb.Inject(Fault{Action: FaultObserve, Count: 1 << 30, Match: func(pk *wire.Packet) bool {
		return pk.BTH.Opcode == wire.RCAcknowledge && pk.AETH.Syndrome.IsNAK()
	}, Hit: func(pk wire.Packet) { naks <- pk }})
	r := p.postRecv(t, 100, 1024)
	msg := pattern(1024, 5) // 4 packets, the second lost on arrival
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: msg})
	if pk := p.waitHit(t); pk.BTH.Opcode != wire.RCSendMiddle {
		t.Fatalf("dropped %v", &pk)
	}
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcB, 100, verbs.WCSuccess)
	if !bytes.Equal(r, msg) {
		t.Fatal("data wrong")
	}
	if nak := next(t, naks); nak.AETH.Syndrome != wire.NAK(wire.NAKPSNSequenceError) || nak.BTH.PSN != start.Add(1) {
		t.Fatalf("NAK %v %#x", &nak, nak.AETH.Syndrome)
	}
	if s := p.tb.Stats(); s.Faulted != 1+1 {
		t.Fatalf("responder's stats %+v: want the dropped packet and the one NAK observed", s)
	}
}

// TestRCInboundLostACK loses the ACK as the requester receives it: no
// completion until the ACK timeout passes; then the requester resends its
// oldest packet, the responder answers the duplicate with an ACK without
// delivering it again, and the WR completes. This is what a requester's
// own fault injection asks of a peer (rxe) as the responder.
func TestRCInboundLostACK(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	if err := p.ta.InjectInbound(Fault{Action: FaultDrop, Match: isOp(wire.RCAcknowledge), Hit: p.hit}); err != nil {
		t.Fatal(err)
	}
	resent := make(chan wire.Packet, 16)
	p.ta.Inject(Fault{Action: FaultObserve, Count: 1 << 30, Match: isOp(wire.RCSendOnly), Hit: func(pk wire.Packet) { resent <- pk }})
	p.postRecv(t, 100, 64)
	p.postRecv(t, 101, 64)
	p.post(t, &sendWQE{id: 1, op: verbs.OpSend, data: []byte("once")})
	next(t, resent) // the first transmission
	expectWC(t, p.wcB, 100, verbs.WCSuccess)
	p.waitHit(t)
	noWC(t, p.wcA)
	p.clock.Advance(testTimeout)
	if pk := next(t, resent); pk.BTH.PSN != 0xfffffe || !pk.BTH.AckReq {
		t.Fatalf("resent %v", &pk)
	}
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	// The duplicate took no receive: the next message takes the next one.
	p.post(t, &sendWQE{id: 2, op: verbs.OpSend, data: []byte("twice")})
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	expectWC(t, p.wcB, 101, verbs.WCSuccess)
	if s := p.ta.Stats(); s.Faulted != 1+3 {
		t.Fatalf("requester's stats %+v: want the dropped ACK and three observed SENDs", s)
	}
}

package rocev2

import (
	"bytes"
	"encoding/binary"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestRCMaxRdAtomic posts a READ and a FETCH_AND_ADD with max_rd_atomic
// 1 and loses the READ's response: the atomic stays unsent while the
// READ awaits its response (a responder with max_dest_rd_atomic 1, rxe
// for one, would refuse it), and goes once the retransmitted READ has
// been answered.
func TestRCMaxRdAtomic(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	p.a.mu.Lock()
	p.a.cfg.MaxRdAtomic = 1
	p.a.mu.Unlock()
	reqs := make(chan wire.Packet, 8)
	p.ta.Inject(Fault{Action: FaultObserve, Count: 1 << 30, Hit: func(pk wire.Packet) { reqs <- pk },
		Match: func(pk *wire.Packet) bool {
			return pk.BTH.Opcode == wire.RCReadRequest || pk.BTH.Opcode == wire.RCFetchAdd
		}})
	p.tb.Inject(Fault{Action: FaultDrop, Match: isOp(wire.RCReadResponseOnly), Hit: p.hit})
	p.writeB(0, pattern(64, 3))
	rd := make([]byte, 64)
	old := make([]byte, 8)
	p.post(t, &sendWQE{id: 1, op: verbs.OpRead, data: rd, raddr: vaB, rkey: rkeyB})
	p.post(t, &sendWQE{id: 2, op: verbs.OpAtomicFetchAdd, data: old, raddr: vaB + 128, rkey: rkeyB, swapAdd: 5})
	// The requester sends on the poster's goroutine: whatever PostSend
	// allowed has left by now.
	if pk := next(t, reqs); pk.BTH.Opcode != wire.RCReadRequest {
		t.Fatalf("first request %v", &pk)
	}
	select {
	case pk := <-reqs:
		t.Fatalf("%v sent while the READ awaits its response", &pk)
	default:
	}
	p.waitHit(t)
	p.clock.Advance(testTimeout)
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	expectWC(t, p.wcA, 2, verbs.WCSuccess)
	if !bytes.Equal(rd, pattern(64, 3)) {
		t.Fatal("READ data wrong")
	}
	if got := binary.NativeEndian.Uint64(p.readB(128, 8)); got != 5 {
		t.Fatalf("the FETCH_AND_ADD left %d, want 5", got)
	}
}

// TestRCStaleReadResponse loses the MIDDLE of a three-packet READ
// response, so the requester asks again from it (one packet: the window a
// timeout leaves), and loses that answer, an ONLY, too; a late MIDDLE of
// the first answer then arrives where the ONLY is expected. The requester
// drops it, asks again after the next timeout, and the READ completes
// with the right bytes.
func TestRCStaleReadResponse(t *testing.T) {
	p := newPair(t, 256, 3, 7)
	got := make(chan wire.PSN, 16)
	p.a.mu.Lock()
	p.a.cfg.observe = func(pk *wire.Packet) { got <- pk.BTH.PSN }
	p.a.mu.Unlock()
	p.writeB(0, pattern(700, 4))
	s := wire.PSN(0xfffffe)
	p.tb.Inject(Fault{Action: FaultDrop, Match: isPSN(s.Add(1)), Hit: p.hit})
	p.tb.Inject(Fault{Action: FaultDrop, Hit: p.hit, Match: func(pk *wire.Packet) bool {
		return pk.BTH.Opcode == wire.RCReadResponseOnly && pk.BTH.PSN == s.Add(1)
	}})
	rd := make([]byte, 700)
	p.post(t, &sendWQE{id: 1, op: verbs.OpRead, data: rd, raddr: vaB, rkey: rkeyB})
	p.waitHit(t) // the first answer's MIDDLE
	next(t, got) // its FIRST, placed
	next(t, got) // its LAST, out of order
	p.clock.Advance(testTimeout)
	p.waitHit(t) // the second answer, an ONLY
	stale := wire.Packet{BTH: wire.BTH{Opcode: wire.RCReadResponseMiddle, DestQP: p.a.cfg.QPN, PSN: s.Add(1)}, Payload: make([]byte, 256)}
	p.a.Receive(p.tb.LocalAddr(), &stale)
	next(t, got)
	noWC(t, p.wcA)
	p.clock.Advance(testTimeout)
	expectWC(t, p.wcA, 1, verbs.WCSuccess)
	if !bytes.Equal(rd, pattern(700, 4)) {
		t.Fatal("READ data wrong")
	}
}

// TestRCWriteKeyRevokedMidMessage hands B's responder the FIRST packet of
// a three-packet WRITE, revokes the rkey (as deregistering the MR does),
// then hands it the MIDDLE: the responder checks the key again, writes
// nothing more and fails with a remote access error, instead of writing
// through the slice it resolved for the FIRST packet.
func TestRCWriteKeyRevokedMidMessage(t *testing.T) {
	p := newPair(t, 256, 7, 7)
	from := p.ta.LocalAddr()
	first := wire.Packet{BTH: wire.BTH{Opcode: wire.RCWriteFirst, DestQP: 0x22, PSN: 0xfffffe},
		RETH: wire.RETH{VA: vaB, RKey: rkeyB, DMALen: 768}, Payload: pattern(256, 1)}
	p.b.Receive(from, &first)
	mem := p.b.cfg.Memory.(*testMemory)
	mem.mu.Lock()
	delete(mem.keys, rkeyB)
	mem.mu.Unlock()
	middle := wire.Packet{BTH: wire.BTH{Opcode: wire.RCWriteMiddle, DestQP: 0x22, PSN: 0xffffff}, Payload: pattern(256, 2)}
	p.b.Receive(from, &middle)
	p.b.mu.Lock()
	failed := p.b.failed
	p.b.mu.Unlock()
	if !failed {
		t.Fatal("B took a WRITE packet through a revoked rkey")
	}
	if got := p.readB(256, 256); !bytes.Equal(got, make([]byte, 256)) {
		t.Fatal("B wrote the MIDDLE packet through a revoked rkey")
	}
}

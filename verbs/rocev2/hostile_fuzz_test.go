package rocev2

import (
	"bytes"
	"encoding/binary"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// fuzzOpcodes are the RC opcodes a hostile datagram may carry: requests
// and responses, in and out of a message's order.
var fuzzOpcodes = []wire.Opcode{
	wire.RCSendFirst, wire.RCSendMiddle, wire.RCSendLast, wire.RCSendLastImm, wire.RCSendOnly, wire.RCSendOnlyImm,
	wire.RCWriteFirst, wire.RCWriteMiddle, wire.RCWriteLast, wire.RCWriteLastImm, wire.RCWriteOnly, wire.RCWriteOnlyImm,
	wire.RCReadRequest, wire.RCReadResponseFirst, wire.RCReadResponseMiddle, wire.RCReadResponseLast, wire.RCReadResponseOnly,
	wire.RCAcknowledge, wire.RCAtomicAcknowledge, wire.RCCompareSwap, wire.RCFetchAdd, wire.RCSendLastInvalidate, wire.RCSendOnlyInvalidate,
}

// fuzzRecordLen is the fixed part of one datagram of FuzzRCDatagrams'
// input; up to its byte 8's worth of payload follows.
const fuzzRecordLen = 12

// settle hands the packets the two sockets hold to their QPs until both
// stay empty: with the receive goroutines stopped, the test decides when
// packets move, and a manual clock when timers fire.
func (p *pair) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a way out of a broken test
	for quiet := 0; quiet < 3; {
		before := handled(p.ta) + handled(p.tb)
		for _, tr := range []*Transport{p.ta, p.tb} {
			tr.rxMu.Lock()
			tr.drain(0)
			tr.rxMu.Unlock()
		}
		if handled(p.ta)+handled(p.tb) != before {
			quiet = 0
		} else {
			quiet++
			runtime.Gosched()
		}
		if time.Now().After(deadline) {
			t.Fatal("the sockets never went quiet")
		}
	}
}

// FuzzRCDatagrams feeds datagrams with valid ICRCs into a live RC pair
// with a WRITE, a READ and a FETCH_AND_ADD outstanding, at PSNs about the
// ones those use, each as if from a stranger's socket or from the peer's
// own address (an attacker who can spoof it). Whatever they carry:
// nothing panics, no byte outside the responder's registered range
// changes, every WQE completes exactly once, and when every datagram came
// from a stranger the three complete with their data, as if nothing had
// been sent.
func FuzzRCDatagrams(f *testing.F) {
	rec := func(flags, op, delta, key byte, va, n uint16, plen, syn byte) []byte {
		b := []byte{flags, op, delta, key, 0, 0, 0, 0, plen, syn, 0, 0}
		binary.BigEndian.PutUint16(b[4:], va)
		binary.BigEndian.PutUint16(b[6:], n)
		return append(b, make([]byte, plen)...)
	}
	f.Add(rec(0, 10, 0, 0, 256, 0, 0, 0))                                          // a stranger's zero-length WRITE at the expected PSN
	f.Add(rec(2, 10, 0, 0, 256, 0, 0, 0))                                          // the same from the peer's address
	f.Add(append(rec(2, 4, 0, 0, 0, 0, 8, 0), rec(2, 12, 1, 0, 0, 4096, 0, 0)...)) // a SEND, then a READ too large
	f.Add(rec(3, 17, 0, 0, 0, 0, 0, 0x60|wire.NAKRemoteAccessError))               // a NAK to the requester from the peer's address
	f.Add(rec(3, 18, 2, 0, 0, 0, 0, 0))                                            // an atomic ACK for the FETCH_AND_ADD's PSN
	f.Add(rec(2, 20, 2, 0, 0x900, 0, 0, 0))                                        // a replayed FETCH_AND_ADD
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newPair(t, 256, 7, 7)
		p.ta.StopReceiving()
		p.tb.StopReceiving()
		const guard, size = 4096, 8192
		mem := p.b.cfg.Memory.(*testMemory)
		mem.mu.Lock()
		mem.keys[rkeyB] = region{va: vaB, buf: p.memB[guard : guard+size], acc: verbs.AccessAllRemote}
		mem.mu.Unlock()
		p.b.mu.Lock()
		for i := range p.memB {
			p.memB[i] = 0xaa
		}
		copy(p.memB[guard+1024:], pattern(512, 7))
		binary.NativeEndian.PutUint64(p.memB[guard+2048:], 100)
		p.b.mu.Unlock()

		base := p.b.expected()
		write := pattern(512, 3)
		rd := make([]byte, 512)
		old := make([]byte, 8)
		p.post(t, &sendWQE{id: 1, op: verbs.OpWrite, data: write, raddr: vaB, rkey: rkeyB})
		p.post(t, &sendWQE{id: 2, op: verbs.OpRead, data: rd, raddr: vaB + 1024, rkey: rkeyB})
		p.post(t, &sendWQE{id: 3, op: verbs.OpAtomicFetchAdd, data: old, raddr: vaB + 2048, rkey: rkeyB, swapAdd: 5})

		strangerOnly := true
		for len(data) >= fuzzRecordLen {
			r := data[:fuzzRecordLen]
			plen := min(int(r[8]), len(data)-fuzzRecordLen, 256)
			payload := data[fuzzRecordLen : fuzzRecordLen+plen]
			data = data[fuzzRecordLen+plen:]
			to, dst := p.tb, p.b
			peerAddr := p.ta.LocalAddr()
			if r[0]&1 != 0 {
				to, dst, peerAddr = p.ta, p.a, p.tb.LocalAddr()
			}
			from := netip.AddrPortFrom(netip.IPv6Loopback(), 40000+uint16(r[10]))
			if r[0]&2 != 0 {
				from, strangerOnly = peerAddr, false
			}
			rkey := uint32(rkeyB)
			if r[3] != 0 {
				rkey = uint32(r[3]) * 0x01010101
			}
			va := vaB - 256 + uint64(binary.BigEndian.Uint16(r[4:]))
			n := uint32(binary.BigEndian.Uint16(r[6:]))
			pk := wire.Packet{BTH: wire.BTH{Opcode: fuzzOpcodes[int(r[1])%len(fuzzOpcodes)], DestQP: dst.cfg.QPN, PKey: wire.DefaultPKey,
				PSN: base.Add(int(int8(r[2]))), AckReq: r[0]&4 != 0, Solicited: r[0]&8 != 0},
				RETH:         wire.RETH{VA: va, RKey: rkey, DMALen: n},
				AtomicETH:    wire.AtomicETH{VA: va, RKey: rkey, SwapAdd: uint64(r[11]), Compare: uint64(r[10])},
				AETH:         wire.AETH{Syndrome: wire.Syndrome(r[9]), MSN: uint32(r[11])},
				AtomicAckETH: wire.AtomicAckETH{OrigRemData: uint64(r[10])},
				IETH:         wire.IETH{RKey: rkey},
			}
			if pk.BTH.Opcode.HasPayload() {
				pk.Payload = payload
			}
			b, err := pk.Append(nil, &wire.IPHeader{Src: from.Addr(), Dst: to.LocalAddr().Addr(), SrcPort: from.Port(), DstPort: to.LocalAddr().Port()})
			if err != nil {
				continue
			}
			to.rxMu.Lock()
			to.handle(b, from)
			to.flush()
			to.rxMu.Unlock()
		}

		done := map[uint64]verbs.WC{}
		for range 64 {
			p.settle(t)
			for len(p.wcA) > 0 {
				wc := <-p.wcA
				if prev, twice := done[wc.WRID]; twice {
					t.Fatalf("WQE %d completed twice: %+v, then %+v", wc.WRID, prev, wc)
				}
				done[wc.WRID] = wc
			}
			if len(done) == 3 {
				break
			}
			p.clock.Advance(testTimeout)
		}
		if len(done) != 3 {
			t.Fatalf("%d of 3 WQEs completed: %+v", len(done), done)
		}
		p.b.mu.Lock()
		outside := append(append([]byte(nil), p.memB[:guard]...), p.memB[guard+size:]...)
		p.b.mu.Unlock()
		if !bytes.Equal(outside, bytes.Repeat([]byte{0xaa}, len(outside))) {
			t.Fatal("a byte outside the registered range changed")
		}
		if !strangerOnly {
			return
		}
		for id, wc := range done {
			if wc.Status != verbs.WCSuccess {
				t.Fatalf("WQE %d: %v with only strangers' datagrams", id, wc.Status)
			}
		}
		got := p.readB(guard, 512)
		if !bytes.Equal(got, write) || !bytes.Equal(rd, pattern(512, 7)) ||
			binary.NativeEndian.Uint64(old) != 100 || binary.NativeEndian.Uint64(p.readB(guard+2048, 8)) != 105 {
			t.Fatal("the WRITE, READ or FETCH_AND_ADD did not do what it asked with only strangers' datagrams")
		}
	})
}

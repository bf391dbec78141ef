package soft_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

const (
	fuzzPage  = 4096
	fuzzGuard = 0xAA
)

// fuzzSide is a QP whose MR is the middle page of a three-page arena; the
// pages around it are guards that must never change.
type fuzzSide struct {
	side
	mem []byte
}

func newFuzzSide(t testing.TB, d verbs.Device, typ verbs.QPType) *fuzzSide {
	t.Helper()
	arena, err := verbs.NewArena(3 * fuzzPage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arena.Close() })
	s := &fuzzSide{mem: arena.Bytes()}
	for i := range s.mem {
		s.mem[i] = fuzzGuard
	}
	if s.ctx, err = d.Open(); err != nil {
		t.Fatal(err)
	}
	s.gid, _ = s.ctx.QueryGID(1, 1)
	s.pd, _ = s.ctx.AllocPD()
	s.cq, _ = s.ctx.CreateCQ(verbs.CQSpec{CQE: 256})
	if s.qp, err = s.pd.CreateQP(verbs.QPSpec{Type: typ, SendCQ: s.cq, RecvCQ: s.cq, SigAll: true,
		Caps: verbs.QPCaps{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 128}}); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(s.mem[fuzzPage:2*fuzzPage], verbs.AccessAllRemote); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *fuzzSide) guardsIntact() bool {
	for _, b := range s.mem[:fuzzPage] {
		if b != fuzzGuard {
			return false
		}
	}
	for _, b := range s.mem[2*fuzzPage:] {
		if b != fuzzGuard {
			return false
		}
	}
	return true
}

// fuzzKey picks a valid key, a garbage one or the peer's.
func fuzzKey(sel byte, own, peer verbs.MR) uint32 {
	switch sel % 4 {
	case 0, 1:
		return own.LKey()
	case 2:
		return peer.LKey()
	}
	return 0xdead00 | uint32(sel)
}

// fuzzAddr is an address near mr: from 256 bytes before it to 256 after.
func fuzzAddr(mr verbs.MR, off uint16) uint64 {
	return mr.Addr() - 256 + uint64(off)%(fuzzPage+512)
}

// FuzzPostSend posts random WR lists on a connected RC or UC pair. Whatever
// the input: no panic; PostSend's count and error keep bad_wr semantics;
// every posted WR completes exactly once (SigAll); and no byte outside the
// registered pages of either side changes.
func FuzzPostSend(f *testing.F) {
	f.Add([]byte{0, 2, 1, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 1, 0, 0x10, 0, 0x40, 0, 0xf0, 0x0f, 3, 7, 0, 0, 0, 0, 4, 2, 2, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 8, 1, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 2, 1, 0, 4, 0, 8, 0, 4, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x80, 0xff, 5, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 3, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		typ := verbs.QPTypeRC
		if len(data) > 0 && data[0]&0x80 != 0 {
			typ = verbs.QPTypeUC
		}
		p := soft.New(soft.Config{Devices: 2})
		devs, _ := p.Devices()
		a, b := newFuzzSide(t, devs[0], typ), newFuzzSide(t, devs[1], typ)
		defer p.Close()
		o := pairOpts{typ: typ, timeout: 1}
		connect(t, &a.side, &b.side, o)
		connect(t, &b.side, &a.side, o)

		var recvs []verbs.RecvWR
		var wrs []verbs.SendWR
		for i := 0; i+16 <= len(data) && len(wrs) < 80; i += 16 {
			c := data[i : i+16]
			if c[15]&0x3 == 3 {
				n := uint32(binary.LittleEndian.Uint16(c[6:]) % 600)
				recvs = append(recvs, verbs.RecvWR{ID: uint64(1000 + i), SGL: []verbs.SGE{{
					Addr: fuzzAddr(b.mr, binary.LittleEndian.Uint16(c[4:])), Length: n, LKey: fuzzKey(c[3], b.mr, a.mr)}}})
				continue
			}
			wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.Opcode(c[0] % 11), Flags: verbs.SendFlags(c[1] & 0x1f),
				Imm: uint32(c[11]), InvalidateRKey: fuzzKey(c[12], b.mr, a.mr)}
			nsge := int(c[2] % 6)
			for k := range nsge {
				n := uint32(binary.LittleEndian.Uint16(c[6:])%600) >> k
				sg := verbs.SGE{Addr: fuzzAddr(a.mr, binary.LittleEndian.Uint16(c[4:])+uint16(k*64)), Length: n,
					LKey: fuzzKey(c[3]+byte(k), a.mr, b.mr)}
				if wr.Flags&verbs.SendInline != 0 {
					// Inline data is read from plain memory by address: keep
					// it inside the mapping, guards included.
					sg.Addr = a.mr.Addr() - fuzzPage + uint64(binary.LittleEndian.Uint16(c[4:]))%(2*fuzzPage)
				}
				wr.SGL = append(wr.SGL, sg)
			}
			remote := fuzzAddr(b.mr, binary.LittleEndian.Uint16(c[8:]))
			rkey := fuzzKey(c[10], b.mr, a.mr)
			wr.RDMA = verbs.RDMA{RemoteAddr: remote, RKey: rkey}
			wr.Atomic = verbs.Atomic{RemoteAddr: remote &^ uint64(c[13]&7), RKey: rkey, CompareAdd: uint64(c[14]), Swap: 7}
			wrs = append(wrs, wr)
		}
		if len(recvs) > 0 {
			if _, err := b.qp.PostRecv(recvs); err != nil {
				var we *verbs.WRError
				if !errors.As(err, &we) && !errors.Is(err, verbs.ErrNoMemory) {
					t.Fatalf("PostRecv: %v", err)
				}
			}
		}
		posted, err := a.qp.PostSend(wrs)
		if posted < 0 || posted > len(wrs) || (err == nil) != (posted == len(wrs)) {
			t.Fatalf("posted %d of %d, err %v", posted, len(wrs), err)
		}
		if err != nil {
			var we *verbs.WRError
			if errors.As(err, &we) {
				if we.Index != posted || we.WRID != wrs[posted].ID {
					t.Fatalf("error names wr %d (id %#x), posted %d", we.Index, we.WRID, posted)
				}
			} else if !errors.Is(err, verbs.ErrNoMemory) {
				t.Fatalf("unexpected error %v", err)
			}
		}
		seen := make(map[uint64]bool)
		buf := make([]verbs.WC, 16)
		deadline := time.Now().Add(10 * time.Second)
		for got := 0; got < posted; {
			n, _ := a.cq.Poll(buf)
			for _, wc := range buf[:n] {
				if wc.WRID >= 1000 {
					continue // A's own receives do not exist; B's land on B's CQ
				}
				if seen[wc.WRID] {
					t.Fatalf("wr %#x completed twice", wc.WRID)
				}
				seen[wc.WRID] = true
				got++
			}
			if n == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d WRs completed", got, posted)
				}
				time.Sleep(20 * time.Microsecond)
			}
		}
		p.Close()
		if !a.guardsIntact() || !b.guardsIntact() {
			t.Fatal("a write landed outside registered memory")
		}
	})
}

package verbstest

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// The Access cases check that the device, not the application, enforces
// what an MR grants a remote peer: an MR over part of a larger arena, with
// some of REMOTE_READ, REMOTE_WRITE and REMOTE_ATOMIC, lets accesses inside
// it through and refuses, with REM_ACCESS_ERR at the requester, one that
// crosses either end by a byte, one that needs a right not granted, any
// through the key of an MR registered with LOCAL_WRITE only, and any through
// the rkey of a deregistered MR, even with a new MR over the same bytes.
// Nothing outside the granted bytes may change, in the MR's own pages
// included. A refused access moves both QPs to ERR (SEMANTICS.md 2-5), so
// each refusal is a case of its own.

// remoteOp is one kind of remote access and the MR right it needs.
type remoteOp struct {
	name  string
	right verbs.Access
	op    verbs.Opcode
}

var (
	opWrite  = remoteOp{"Write", verbs.AccessRemoteWrite, verbs.OpWrite}
	opRead   = remoteOp{"Read", verbs.AccessRemoteRead, verbs.OpRead}
	opAtomic = remoteOp{"Atomic", verbs.AccessRemoteAtomic, verbs.OpAtomicFetchAdd}
)

// remoteAll is every remote right; remoteSubsets are its non-empty subsets.
const remoteAll = verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic

var remoteSubsets = []verbs.Access{
	verbs.AccessRemoteRead, verbs.AccessRemoteWrite, verbs.AccessRemoteAtomic,
	verbs.AccessRemoteRead | verbs.AccessRemoteWrite, verbs.AccessRemoteRead | verbs.AccessRemoteAtomic,
	verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic, remoteAll,
}

// mrAccess is the access of an MR granting remote: with LOCAL_WRITE when
// remote has REMOTE_WRITE or REMOTE_ATOMIC, which need it
// (ib_check_mr_access).
func mrAccess(remote verbs.Access) verbs.Access {
	if remote&(verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic) != 0 {
		return remote | verbs.AccessLocalWrite
	}
	return remote
}

// B's MR covers bytes [rangeOff, rangeEnd) of an arena of rangeArena bytes,
// inside its second page. rangeOff is 1 past a multiple of 8 and rangeEnd 1
// short of one, so an aligned 8-byte atomic can start 1 byte before the MR
// or end 1 byte past it. WRITEs and READs that cross an end are probeLen
// bytes long.
const (
	rangeArena = 3 * 4096
	rangeOff   = 4096 + 1
	rangeLen   = 2046
	rangeEnd   = rangeOff + rangeLen
	probeLen   = 64
	// insidePos is an 8-byte aligned offset of the arena inside the MR.
	insidePos = rangeOff + 7
	// atomicAdd is what the FETCH_ADDs of these cases add.
	atomicAdd = 0x0102030405060708
)

// length is how many remote bytes one access of o touches here.
func (o remoteOp) length() int {
	if o.op == verbs.OpAtomicFetchAdd {
		return 8
	}
	return probeLen
}

// wr is o of n bytes (8 for the atomic) between A's la at loff and the
// remote address addr, through rkey.
func (o remoteOp) wr(la *mem, loff int, addr uint64, rkey uint32, n int) verbs.SendWR {
	if o.op == verbs.OpAtomicFetchAdd {
		return verbs.SendWR{Opcode: o.op, SGL: la.sgl(loff, 8),
			Atomic: verbs.Atomic{RemoteAddr: addr, RKey: rkey, CompareAdd: atomicAdd}}
	}
	return verbs.SendWR{Opcode: o.op, SGL: la.sgl(loff, n), RDMA: verbs.RDMA{RemoteAddr: addr, RKey: rkey}}
}

// arenaAddr is the address of byte pos of m's arena.
func (m *mem) arenaAddr(pos int) uint64 { return m.mr.Addr() - uint64(m.lead) + uint64(pos) }

// accessErrCase runs one remote access of A that B must refuse. setup
// makes B's memory and the WR (it may post on a first, and must then take
// the completions). A's WR fails with REM_ACCESS_ERR, both QPs go to ERR
// and B's posted receive is flushed (SEMANTICS.md 2); nothing changes in
// B's arena, inside the MR or around it, nor in A's memory.
func accessErrCase(t *testing.T, s *suite, setup func(e *env, a *endpoint, la *mem) (*mem, verbs.SendWR)) {
	e := s.newEnv(t)
	a, b := e.rcPair()
	la := e.a.newMem(4096, verbs.AccessLocalWrite)
	rq := e.b.newMem(64, verbs.AccessLocalWrite)
	copy(la.buf, pattern(4096, 20))
	rb, wr := setup(e, a, la)
	beforeA, beforeB := bytes.Clone(la.all), bytes.Clone(rb.all)
	b.recv(rq.recvWR(0x300, 0, 64))
	wr.ID, wr.Flags = 20, wr.Flags|verbs.SendSignaled
	a.post(wr)
	wantErrWC(t, e.waitWC(a.cq, "A's "+wr.Opcode.String()), 20, a.qp.QPN(), verbs.WCRemAccessErr)
	// The responder that NAKed goes to ERR too, flushing its receive.
	wantFlushed(t, e.waitWC(b.cq, "B's RECV"), 0x300, b.qp.QPN())
	e.waitState(a, verbs.QPStateErr)
	e.waitState(b, verbs.QPStateErr)
	wantBytes(t, "B's arena (nothing may be written, not even in part, in the MR or around it)", rb.all, beforeB)
	wantBytes(t, "A's memory", la.all, beforeA)
	rq.wantOnly(t, "B's receive buffer", 0, nil)
}

// rangeErr is the case of o at byte pos of B's arena, the MR over
// [rangeOff, rangeEnd) granting remote.
func rangeErr(o remoteOp, pos int, remote verbs.Access) func(*testing.T, *suite) {
	return func(t *testing.T, s *suite) {
		accessErrCase(t, s, func(e *env, a *endpoint, la *mem) (*mem, verbs.SendWR) {
			rb := e.b.newMemRange(rangeArena, rangeOff, rangeLen, mrAccess(remote))
			return rb, o.wr(la, 0, rb.arenaAddr(pos), rb.mr.RKey(), o.length())
		})
	}
}

// Access/{Write,Read,Atomic}PastEnd (SEMANTICS.md 3c, one byte over): an
// access that starts inside the MR and ends one byte past it.
func testAccessPastEnd(o remoteOp) func(*testing.T, *suite) {
	return rangeErr(o, rangeEnd-o.length()+1, remoteAll)
}

// Access/{Write,Read,Atomic}BeforeStart (SEMANTICS.md 3d, one byte
// under): an access that starts one byte before the MR.
func testAccessBeforeStart(o remoteOp) func(*testing.T, *suite) {
	return rangeErr(o, rangeOff-1, remoteAll)
}

// Access/{Write,Read,Atomic}NotGranted (SEMANTICS.md 2, 4, 5c): an access
// inside an MR whose remote rights lack the one it needs, for each set of
// rights without it.
func testAccessNotGranted(o remoteOp) func(*testing.T, *suite) {
	return func(t *testing.T, s *suite) {
		for _, remote := range remoteSubsets {
			if remote&o.right == 0 {
				t.Run(remote.String(), func(t *testing.T) { rangeErr(o, insidePos, remote)(t, s) })
			}
		}
	}
}

// Access/LocalWriteOnly{Write,Read,Atomic}: an MR registered with
// LOCAL_WRITE alone, as the runtime registers its arena's chunks, cannot be
// reached remotely, neither through its rkey nor through its lkey taken
// for one.
func testAccessLocalWriteOnly(o remoteOp) func(*testing.T, *suite) {
	return func(t *testing.T, s *suite) {
		for _, key := range []string{"rkey", "lkey"} {
			t.Run(key, func(t *testing.T) {
				accessErrCase(t, s, func(e *env, a *endpoint, la *mem) (*mem, verbs.SendWR) {
					rb := e.b.newMemRange(rangeArena, rangeOff, rangeLen, verbs.AccessLocalWrite)
					k := rb.mr.RKey()
					if key == "lkey" {
						k = rb.mr.LKey()
					}
					t.Logf("LOCAL_WRITE-only MR: lkey %#x, rkey %#x", rb.mr.LKey(), rb.mr.RKey())
					return rb, o.wr(la, 0, rb.arenaAddr(insidePos), k, o.length())
				})
			})
		}
	}
}

// Access/Deregistered{Write,Read,Atomic}: once an MR is deregistered, its
// rkey is refused, even with a new MR over the same bytes, which gets
// another rkey. The old rkey worked before; the new one works after.
func testAccessDeregistered(o remoteOp) func(*testing.T, *suite) {
	return func(t *testing.T, s *suite) {
		accessErrCase(t, s, func(e *env, a *endpoint, la *mem) (*mem, verbs.SendWR) {
			rb := e.b.newMemRange(rangeArena, rangeOff, rangeLen, mrAccess(remoteAll))
			addr, old := rb.arenaAddr(insidePos), rb.mr.RKey()
			wr := o.wr(la, 0, addr, old, o.length())
			wr.ID, wr.Flags = 1, verbs.SendSignaled
			a.post(wr)
			wantOK(t, e.waitWC(a.cq, "A's access through the first MR"), 1, verbs.WCOpcodeOf(o.op), a.qp.QPN())
			if err := rb.mr.Close(); err != nil {
				t.Fatalf("B: MR.Close: %v", err)
			}
			mr, err := e.b.pd.RegMR(rb.buf, mrAccess(remoteAll))
			if err != nil {
				t.Fatalf("B: RegMR over the bytes of the deregistered MR: %v", err)
			}
			own(t, "B's second MR", mr)
			t.Logf("rkey %#x deregistered, the new MR over the same bytes has rkey %#x", old, mr.RKey())
			if mr.RKey() == old {
				t.Fatalf("the new MR over the same bytes got the deregistered MR's rkey %#x", old)
			}
			rb.mr = mr
			wr = o.wr(la, 0, addr, mr.RKey(), o.length())
			wr.ID, wr.Flags = 2, verbs.SendSignaled
			a.post(wr)
			wantOK(t, e.waitWC(a.cq, "A's access through the new MR"), 2, verbs.WCOpcodeOf(o.op), a.qp.QPN())
			return rb, o.wr(la, 0, addr, old, o.length())
		})
	}
}

// Access/InsideGrantedRange: for each set of remote rights, the accesses
// it grants succeed at both ends of the MR (a WRITE and a READ of the
// whole MR, FETCH_ADDs at its first and last aligned u64), every byte of
// the arena outside the MR is unchanged, and both QPs stay in RTS.
func testAccessInside(t *testing.T, s *suite) {
	for _, remote := range remoteSubsets {
		t.Run(remote.String(), func(t *testing.T) {
			e := s.newEnv(t)
			a, b := e.rcPair()
			la := e.a.newMem(4096+16, verbs.AccessLocalWrite)
			rb := e.b.newMemRange(rangeArena, rangeOff, rangeLen, mrAccess(remote))
			copy(rb.buf, pattern(rangeLen, 71)) // what READs return unless a WRITE came first
			model := bytes.Clone(rb.all)
			id := uint64(0)
			do := func(o remoteOp, loff, pos, n int) {
				t.Helper()
				id++
				wr := o.wr(la, loff, rb.arenaAddr(pos), rb.mr.RKey(), n)
				wr.ID, wr.Flags = id, verbs.SendSignaled
				a.post(wr)
				wc := e.waitWC(a.cq, "A's "+o.op.String())
				if wantOK(t, wc, id, verbs.WCOpcodeOf(o.op), a.qp.QPN()) && o.op != verbs.OpAtomicFetchAdd {
					wantLen(t, wc, n)
				}
			}
			if remote&verbs.AccessRemoteWrite != 0 {
				data := pattern(rangeLen, 72)
				copy(la.buf, data)
				do(opWrite, 0, rangeOff, rangeLen)
				copy(model[rangeOff:], data)
			}
			if remote&verbs.AccessRemoteRead != 0 {
				do(opRead, 2048, rangeOff, rangeLen)
				wantBytes(t, "what the READ of the whole MR returned", la.buf[2048:2048+rangeLen], model[rangeOff:rangeEnd])
			}
			if remote&verbs.AccessRemoteAtomic != 0 {
				for i, pos := range []int{insidePos, rangeEnd - 15} {
					loff := 4096 + 8*i
					do(opAtomic, loff, pos, 8)
					old := binary.NativeEndian.Uint64(model[pos:])
					if got := binary.NativeEndian.Uint64(la.buf[loff:]); got != old {
						t.Errorf("FETCH_ADD at arena offset %d returned %#x, want %#x", pos, got, old)
					}
					binary.NativeEndian.PutUint64(model[pos:], old+atomicAdd)
				}
			}
			wantFill(t, "B's arena before the MR", rb.all[:rangeOff])
			wantFill(t, "B's arena after the MR", rb.all[rangeEnd:])
			wantBytes(t, "B's MR", rb.buf, model[rangeOff:rangeEnd])
			wantState(t, a, verbs.QPStateRTS)
			wantState(t, b, verbs.QPStateRTS)
		})
	}
}

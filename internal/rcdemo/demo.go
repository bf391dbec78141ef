package rcdemo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// end is one side of the demo connection.
type end struct {
	ctx   verbs.Context
	pd    verbs.PD
	cq    verbs.CQ
	qp    verbs.QP
	mr    verbs.MR
	arena *verbs.Arena
	info  verbs.PeerInfo
}

// openEnd opens d and makes one end on it; on an error it closes what it
// made.
func openEnd(d verbs.Device, gidIndex, size, batch int) (*end, error) {
	e := &end{}
	if err := e.open(d, gidIndex, size, batch); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *end) open(d verbs.Device, gidIndex, size, batch int) error {
	var err error
	if e.ctx, err = d.Open(); err != nil {
		return err
	}
	gid, err := e.ctx.QueryGID(1, gidIndex)
	if err != nil {
		return err
	}
	port, err := e.ctx.QueryPort(1)
	if err != nil {
		return err
	}
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return err
	}
	if e.cq, err = e.ctx.CreateCQ(verbs.CQSpec{CQE: 2 * batch}); err != nil {
		return err
	}
	if e.qp, err = e.pd.CreateQP(verbs.QPSpec{Type: verbs.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Caps: verbs.QPCaps{MaxSendWR: batch, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return err
	}
	if e.arena, err = verbs.NewArena(2*size*batch + 4096); err != nil {
		return err
	}
	// For local use only: the peer reaches this memory through the
	// exposures of demo (expose), each over its own bytes and rights.
	if e.mr, err = e.pd.RegMR(e.arena.Bytes(), verbs.AccessLocalWrite); err != nil {
		return err
	}
	e.info = verbs.PeerInfo{LID: port.LID, QPN: e.qp.QPN(), GID: gid}
	return nil
}

// close releases what e holds; it may be partly made.
func (e *end) close() {
	if e.ctx != nil {
		e.ctx.Close() // destroys the QP, MR, CQ and PD with it
	}
	if e.arena != nil {
		e.arena.Close()
	}
}

// post posts wrs and waits for n completions on e's CQ.
func (e *end) post(wrs []verbs.SendWR, n int) ([]verbs.WC, error) {
	if _, err := e.qp.PostSend(wrs); err != nil {
		return nil, err
	}
	return waitWC(e.cq, n)
}

func waitWC(cq verbs.CQ, n int) ([]verbs.WC, error) {
	out := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, 16)
	deadline := time.Now().Add(5 * time.Second)
	for len(out) < n {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			return out, err
		}
		for _, wc := range buf[:k] {
			if err := wc.Err(); err != nil {
				return out, err
			}
			out = append(out, wc)
		}
		if k == 0 {
			if time.Now().After(deadline) {
				return out, fmt.Errorf("%d of %d completions after 5 s", len(out), n)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return out, nil
}

// Run connects an RC QP on the first device of p, soft or rocev2, to one
// on its second and runs each kind of transfer once, checking what
// arrived.
func Run(w io.Writer, p verbs.Provider, size, batch int) error {
	devs, err := p.Devices()
	if err != nil {
		return err
	}
	if len(devs) < 2 {
		return fmt.Errorf("provider %s: the demo needs two devices, it has %d", p.Name(), len(devs))
	}
	// soft's GID 1 is the IPv4-mapped RoCE v2 one; rocev2 has one, its
	// bound address.
	gidIndex := 0
	if p.Name() == "soft" {
		gidIndex = 1
	}
	a, err := openEnd(devs[0], gidIndex, size, batch)
	if err != nil {
		return err
	}
	defer a.close()
	b, err := openEnd(devs[1], gidIndex, size, batch)
	if err != nil {
		return err
	}
	defer b.close()
	spec := verbs.ConnectSpec{GIDIndex: uint8(gidIndex)}
	if err := verbs.Connect(a.qp, spec, b.info); err != nil {
		return err
	}
	if err := verbs.Connect(b.qp, spec, a.info); err != nil {
		return err
	}
	fmt.Fprintf(w, "verbsrt demo: provider %s, RC QP %#x on %s <-> RC QP %#x on %s (GID %s <-> %s)\n",
		p.Name(), a.qp.QPN(), devs[0].Name(), b.qp.QPN(), devs[1].Name(), a.info.GID, b.info.GID)

	am, bm := a.mr.Bytes(), b.mr.Bytes()
	for i := range size {
		am[i] = byte(i*7 + 1)
	}
	local := func(off, n int) []verbs.SGE {
		return []verbs.SGE{{Addr: a.mr.Addr() + uint64(off), Length: uint32(n), LKey: a.mr.LKey()}}
	}
	// b grants a each step's access and no more: an MR over the bytes the
	// step touches, with the rights it needs.
	expose := func(off, n int, access verbs.Access) (verbs.MR, error) {
		return b.pd.RegMR(bm[off:off+n], verbs.AccessLocalWrite|access)
	}
	rw, err := expose(0, size, verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		return err
	}
	remote := func(mr verbs.MR, off int) verbs.RDMA {
		return verbs.RDMA{RemoteAddr: mr.Addr() + uint64(off), RKey: mr.RKey()}
	}
	report := func(what string, wc verbs.WC, ok bool, detail string) error {
		verdict := "ok"
		if !ok {
			verdict = "MISMATCH"
		}
		fmt.Fprintf(w, "  %-22s %-20s %6d B  %s  %s\n", what, wc.Opcode, wc.ByteLen, verdict, detail)
		if !ok {
			return fmt.Errorf("%s: %s", what, detail)
		}
		return nil
	}

	start := time.Now()
	wcs, err := a.post([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: local(0, size), RDMA: remote(rw, 0)}}, 1)
	if err != nil {
		return err
	}
	if err := report("RDMA WRITE", wcs[0], bytes.Equal(bm[:size], am[:size]), "remote memory matches"); err != nil {
		return err
	}

	wcs, err = a.post([]verbs.SendWR{{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: local(size, size), RDMA: remote(rw, 0)}}, 1)
	if err != nil {
		return err
	}
	if err := report("RDMA READ", wcs[0], bytes.Equal(am[size:2*size], am[:size]), "read back what was written"); err != nil {
		return err
	}

	if _, err := b.qp.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{{Addr: b.mr.Addr() + uint64(size),
		Length: uint32(size), LKey: b.mr.LKey()}}}}); err != nil {
		return err
	}
	if _, err = a.post([]verbs.SendWR{{ID: 3, Opcode: verbs.OpSendImm, Imm: 0xc0ffee, Flags: verbs.SendSignaled,
		SGL: local(0, size)}}, 1); err != nil {
		return err
	}
	recvd, err := waitWC(b.cq, 1)
	if err != nil {
		return err
	}
	if err := report("SEND with immediate", recvd[0], recvd[0].Imm == 0xc0ffee && bytes.Equal(bm[size:2*size], am[:size]),
		fmt.Sprintf("received, imm %#x, from QP %#x", recvd[0].Imm, recvd[0].SrcQP)); err != nil {
		return err
	}

	binary.LittleEndian.PutUint64(bm[0:8], 40)
	counter, err := expose(0, 8, verbs.AccessRemoteAtomic)
	if err != nil {
		return err
	}
	atomicWR := func(id uint64, op verbs.Opcode, cmpAdd, swap uint64) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: op, Flags: verbs.SendSignaled, SGL: local(2*size, 8),
			Atomic: verbs.Atomic{RemoteAddr: counter.Addr(), RKey: counter.RKey(), CompareAdd: cmpAdd, Swap: swap}}
	}
	wcs, err = a.post([]verbs.SendWR{atomicWR(4, verbs.OpAtomicFetchAdd, 2, 0)}, 1)
	if err != nil {
		return err
	}
	old, now := binary.LittleEndian.Uint64(am[2*size:]), binary.LittleEndian.Uint64(bm[0:8])
	if err := report("FETCH_AND_ADD +2", wcs[0], old == 40 && now == 42, fmt.Sprintf("returned %d, remote now %d", old, now)); err != nil {
		return err
	}
	wcs, err = a.post([]verbs.SendWR{atomicWR(5, verbs.OpAtomicCmpSwp, 42, 7)}, 1)
	if err != nil {
		return err
	}
	old, now = binary.LittleEndian.Uint64(am[2*size:]), binary.LittleEndian.Uint64(bm[0:8])
	if err := report("CMP_AND_SWP 42->7", wcs[0], old == 42 && now == 7, fmt.Sprintf("returned %d, remote now %d", old, now)); err != nil {
		return err
	}

	// Doorbell batching: one PostSend, one signaled WR at the end.
	slots, err := expose(size, 64*batch, verbs.AccessRemoteWrite)
	if err != nil {
		return err
	}
	wrs := make([]verbs.SendWR, batch)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(100 + i), Opcode: verbs.OpWrite, SGL: local(0, 64), RDMA: remote(slots, 64*i)}
	}
	wrs[batch-1].Flags = verbs.SendSignaled
	calls, _ := verbs.PostCalls(a.qp)
	wcs, err = a.post(wrs, 1)
	if err != nil {
		return err
	}
	after, _ := verbs.PostCalls(a.qp)
	okBatch := after-calls == 1
	for i := range batch {
		okBatch = okBatch && bytes.Equal(bm[size+64*i:size+64*i+64], am[:64])
	}
	if err := report(fmt.Sprintf("%d WRITEs, 1 doorbell", batch), wcs[0], okBatch,
		fmt.Sprintf("%d PostSend call, 1 completion (selective signaling)", after-calls)); err != nil {
		return err
	}

	// Revocation: b deregisters the first exposure; its key reaches nothing
	// any more, and b's device refuses the same WRITE (which ends the
	// connection, as any failed RC operation does: the last step).
	if err := rw.Close(); err != nil {
		return err
	}
	before := bytes.Clone(bm[:size])
	for i := range size {
		am[i] = ^am[i]
	}
	if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 6, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: local(0, size), RDMA: remote(rw, 0)}}); err != nil {
		return err
	}
	_, err = waitWC(a.cq, 1)
	var wce *verbs.WCError
	refused := errors.As(err, &wce) && wce.Status == verbs.WCRemAccessErr
	if err := report("WRITE, key revoked", verbs.WC{Opcode: verbs.WCRDMAWrite}, refused && bytes.Equal(bm[:size], before),
		fmt.Sprintf("refused: %v; remote memory unchanged", err)); err != nil {
		return err
	}
	fmt.Fprintf(w, "all transfers verified in %v\n", time.Since(start).Round(time.Microsecond))
	return nil
}

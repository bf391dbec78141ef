package rocev2_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// childEnv makes this test binary the echo peer of TestTwoProcesses.
const childEnv = "VERBSRT_ROCEV2_ECHO_PEER"

// hello is what the two processes exchange before connecting: what
// ibv_rc_pingpong exchanges (the LID is the UDP port), and a buffer the
// peer may write.
type hello struct {
	Peer verbs.PeerInfo
	Addr uint64
	RKey uint32
}

func (e *end) hello() hello {
	return hello{Peer: verbs.PeerInfo{LID: e.port.LID, QPN: e.qp.QPN(), PSN: e.psn, GID: e.gid},
		Addr: e.mr.Addr(), RKey: e.mr.RKey()}
}

// TestTwoProcesses runs RC between two processes, each with a provider
// of its own on ::1 and a socket on a port the kernel picked: they swap
// LID, QPN, PSN, GID and a buffer over the child's stdin and stdout, as
// ibv_rc_pingpong does over TCP. The parent SENDs a message; the child
// WRITEs it into the parent's buffer and SENDs it back.
func TestTwoProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		os.Exit(echoPeer(t))
	}
	p := newProvider(t)
	devs, _ := p.Devices()
	a := newEnd(t, devs[0])

	child := startChild(t, "TestTwoProcesses", childEnv+"=1", 20*time.Second)
	stdin, stdout := child.stdin, child.stdout
	var peer hello
	if err := json.NewDecoder(stdout).Decode(&peer); err != nil {
		t.Fatalf("reading the peer's hello: %v", err)
	}
	if err := json.NewEncoder(stdin).Encode(a.hello()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Init(a.qp, verbs.ConnectSpec{}); err != nil {
		t.Fatal(err)
	}
	rq := a.mr.Addr() + 4096
	if _, err := a.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: rq, Length: 256, LKey: a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(a.qp, verbs.ConnectSpec{PSN: a.psn}, peer.Peer); err != nil {
		t.Fatal(err)
	}
	msg := []byte("across two processes, RoCE v2 from user space")
	copy(a.mem, msg)
	if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: a.mr.Addr(), Length: uint32(len(msg)), LKey: a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]verbs.WC{}
	for len(got) < 2 {
		wc := poll(t, a.cq)
		if wc.Status != verbs.WCSuccess {
			t.Fatalf("completion %+v", wc)
		}
		got[wc.WRID] = wc
	}
	if got[1].ByteLen != uint32(len(msg)) || !bytes.Equal(a.mem[4096:4096+len(msg)], msg) {
		t.Errorf("the echo SEND brought %q", a.mem[4096:4096+got[1].ByteLen])
	}
	if w := a.mem[8192 : 8192+len(msg)]; !bytes.Equal(w, msg) {
		t.Errorf("the peer's WRITE left %q", w)
	}
}

// echoPeer is the child of TestTwoProcesses: it receives one message,
// WRITEs it at offset 8192 of the parent's buffer, SENDs it back, and
// exits once both are acknowledged.
func echoPeer(t *testing.T) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "echo peer: "+format+"\n", args...)
		return 1
	}
	p, err := rocev2.New(rocev2.Config{})
	if err != nil {
		return fail("New: %v", err)
	}
	defer p.Close()
	devs, _ := p.Devices()
	b := newEnd(t, devs[0])
	if err := verbs.Init(b.qp, verbs.ConnectSpec{}); err != nil {
		return fail("Init: %v", err)
	}
	if _, err := b.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: b.mr.Addr(), Length: 256, LKey: b.mr.LKey()}}}}); err != nil {
		return fail("PostRecv: %v", err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(b.hello()); err != nil {
		return fail("hello: %v", err)
	}
	var peer hello
	if err := json.NewDecoder(bufio.NewReader(os.Stdin)).Decode(&peer); err != nil {
		return fail("reading the parent's hello: %v", err)
	}
	if err := verbs.Connect(b.qp, verbs.ConnectSpec{PSN: b.psn}, peer.Peer); err != nil {
		return fail("Connect: %v", err)
	}
	wc := poll(t, b.cq)
	if wc.WRID != 1 || wc.Status != verbs.WCSuccess {
		return fail("receive: %+v", wc)
	}
	sgl := []verbs.SGE{{Addr: b.mr.Addr(), Length: wc.ByteLen, LKey: b.mr.LKey()}}
	if _, err := b.qp.PostSend([]verbs.SendWR{
		{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: sgl,
			RDMA: verbs.RDMA{RemoteAddr: peer.Addr + 8192, RKey: peer.RKey}},
		{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: sgl},
	}); err != nil {
		return fail("PostSend: %v", err)
	}
	for _, id := range []uint64{2, 3} {
		if wc := poll(t, b.cq); wc.WRID != id || wc.Status != verbs.WCSuccess {
			return fail("completion %+v, want %d", wc, id)
		}
	}
	return 0
}

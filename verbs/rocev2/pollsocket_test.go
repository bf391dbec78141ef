//go:build unix

package rocev2_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// TestPollReceivesWithoutReceiveGoroutine stops both transports' receive
// goroutines, standing for a scheduler that never runs them because
// pollers spin, and checks that polling the CQs alone moves a SEND and its
// ACK: the responder's receive completes with the data, then the
// requester's send. It then checks the bound on the system calls: polls
// of an empty CQ read the socket once every PollEvery polls.
func TestPollReceivesWithoutReceiveGoroutine(t *testing.T) {
	p := newProvider(t)
	devs, _ := p.Devices()
	a, b := newEnd(t, devs[0]), newEnd(t, devs[1])
	connect(t, a, b)
	p.Transport(0).StopReceiving()
	p.Transport(1).StopReceiving()

	data := []byte("received by the poll of the CQ")
	if _, err := b.qp.PostRecv([]verbs.RecvWR{{ID: 1,
		SGL: []verbs.SGE{{Addr: b.mr.Addr(), Length: 256, LKey: b.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	copy(a.mem[1024:], data)
	if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: a.mr.Addr() + 1024, Length: uint32(len(data)), LKey: a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	var recv, send *verbs.WC
	wc := make([]verbs.WC, 1)
	deadline := time.Now().Add(10 * time.Second) // a way out of a broken test, not a measurement
	for recv == nil || send == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no completion from the polls alone: receive %v, send %v; stats %+v / %+v",
				recv, send, p.Transport(0).Stats(), p.Transport(1).Stats())
		}
		if n, err := b.cq.Poll(wc); err != nil {
			t.Fatal(err)
		} else if n == 1 {
			recv = &verbs.WC{}
			*recv = wc[0]
		}
		if n, err := a.cq.Poll(wc); err != nil {
			t.Fatal(err)
		} else if n == 1 {
			send = &verbs.WC{}
			*send = wc[0]
		}
	}
	if recv.WRID != 1 || recv.Status != verbs.WCSuccess || recv.ByteLen != uint32(len(data)) {
		t.Fatalf("receive completion %+v", *recv)
	}
	if !bytes.Equal(b.mem[:len(data)], data) {
		t.Fatalf("received %q, want %q", b.mem[:len(data)], data)
	}
	if send.WRID != 2 || send.Status != verbs.WCSuccess {
		t.Fatalf("send completion %+v", *send)
	}
	for i := range 2 {
		if st := p.Transport(i).Stats(); st.PollPackets == 0 {
			t.Errorf("transport %d: stats %+v, want packets received by polls", i, st)
		}
	}

	before, emptyBefore := p.Transport(0).Stats().PollReads, p.Transport(0).Stats().EmptyReads
	const rounds = 10
	for range rounds * rocev2.PollEvery {
		if n, err := a.cq.Poll(wc); err != nil || n != 0 {
			t.Fatalf("Poll of an idle CQ: %d, %v", n, err)
		}
	}
	if got := p.Transport(0).Stats().PollReads - before; got != rounds {
		t.Errorf("%d empty polls read the socket %d times, want %d (one in %d)",
			rounds*rocev2.PollEvery, got, rounds, rocev2.PollEvery)
	}
	// Each of those reads found nothing; the receive goroutine's may add
	// to them.
	if got := p.Transport(0).Stats().EmptyReads - emptyBefore; got < rounds {
		t.Errorf("%d reads of an idle socket counted %d empty, want at least %d", rounds, got, rounds)
	}
}

package runtime_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestSendImmArrivesWhole: the immediate data of a SEND_WITH_IMM (SendImm,
// or Post with OpSendImm) reaches the peer's Recv with all 32 bits, bits
// 31 and 30 included, among plain Sends and WriteImms, while the two ends
// run out of receive credits and report them under load both ways, and up
// to a graceful close: the credit reports travel in the header, never in
// the immediate data.
func TestSendImmArrivesWhole(t *testing.T) {
	// Four receives a side and no RNR retry: credits run out every few
	// messages, and a SEND that met an empty receive queue would fail the
	// connection.
	rt, a, b := pair(t, runtime.WithRecvDepth(4), runtime.WithRNRRetry(0))
	immTraffic(t, ctxT(t), rt, rt, a, b, 400)
}

// The message kinds immTraffic sends, by index modulo immKinds.
const (
	kindSend       = iota // Send, 16 bytes
	kindSendImm           // SendImm, 16 bytes
	kindPostImm           // Post of one OpSendImm, 16 bytes
	kindPostImmNil        // Post of one OpSendImm without data
	kindWriteImm          // WriteImm of 8 bytes into the peer's region
	immKinds
)

// immSpecials are the immediate values sent first, each by every kind that
// carries one: those with the bits a credit scheme in the immediate data
// would claim (31: a credit-only report, 30: the goodbye, the low 16:
// credits).
var immSpecials = []uint32{0xffffffff, 0x80000000, 0x40000000, 0xc0000000, 0xc0000001,
	0x8000ffff, 0x7fffffff, 0xffff, 0, 1}

// msgLen is the length of the data a message of kind brings to Recv.
func msgLen(kind int) int {
	if kind == kindPostImmNil || kind == kindWriteImm {
		return 0
	}
	return 16
}

// immOf is the immediate value of message i.
func immOf(i int) uint32 {
	if k := i / immKinds; k < len(immSpecials) {
		return immSpecials[k]
	}
	return uint32(i) * 0x9e3779b9 // every bit position, changing from message to message
}

// immTraffic sends n messages of every kind, in order and many in flight,
// from a (on rtA) to b (on rtB), and checks each arrives in order with its
// bytes and immediate data. Until half of them arrived the traffic is one
// way, so b reports its credits in credit reports alone; then b sends n
// plain messages back, and the credits of each side also travel in front
// of its messages. Then a closes and b sees the graceful close.
func immTraffic(t *testing.T, ctx context.Context, rtA, rtB *runtime.Runtime, a, b *runtime.Endpoint, n int) {
	t.Helper()
	src := alloc(t, rtA, 16*n)
	target := alloc(t, rtB, 8*n)
	back := alloc(t, rtB, 16)

	forward := make(chan error, 1)
	half := make(chan struct{})
	go func() { forward <- checkImmMessages(ctx, b, n, half) }()
	backward := make(chan error, 1)
	go func() { // b's messages to a, so that credits travel both ways under load
		for i := range n {
			m, err := a.Recv(ctx)
			if err != nil {
				backward <- fmt.Errorf("a's receive %d of %d: %w", i, n, err)
				return
			}
			m.Release()
		}
		backward <- nil
	}()
	backSent := make(chan []runtime.Future, 1)
	go func() {
		fs := make([]runtime.Future, 0, n)
		select {
		case <-half:
		case <-ctx.Done():
		}
		for range n {
			fs = append(fs, b.Send(ctx, back.Local()))
		}
		backSent <- fs
	}()

	futures := make([]runtime.Future, 0, n)
	for i := range n {
		msg := src.Bytes()[16*i : 16*i+16]
		binary.LittleEndian.PutUint64(msg, uint64(i))
		binary.LittleEndian.PutUint64(msg[8:], ^uint64(i))
		local, imm := src.Slice(16*i, 16), immOf(i)
		var f runtime.Future
		switch i % immKinds {
		case kindSend:
			f = a.Send(ctx, local)
		case kindSendImm:
			f = a.SendImm(ctx, local, imm)
		case kindPostImm:
			f = a.Post(ctx, []runtime.Op{{Opcode: verbs.OpSendImm, Local: []runtime.Local{local}, Imm: imm}})
		case kindPostImmNil:
			f = a.Post(ctx, []runtime.Op{{Opcode: verbs.OpSendImm, Imm: imm}})
		case kindWriteImm:
			f = a.WriteImm(ctx, src.Slice(16*i, 8), refOf(t, target).At(8*i), imm)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		c, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("a's message %d (kind %d): %v", i, i%immKinds, err)
		}
		// A SEND's completion counts the caller's bytes, not the header.
		if kind := i % immKinds; kind != kindWriteImm && c.ByteLen != uint32(msgLen(kind)) {
			t.Errorf("a's message %d (kind %d): completion of %d bytes, want %d", i, kind, c.ByteLen, msgLen(kind))
		}
	}
	for i, f := range <-backSent {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("b's message %d: %v", i, err)
		}
	}
	if err := <-forward; err != nil {
		t.Fatal(err)
	}
	if err := <-backward; err != nil {
		t.Fatal(err)
	}
	// Every WR a posted beyond its messages, and b beyond its own, is a
	// credit report alone.
	reportsA := a.Actor().Stats().WRsPosted.Load() - uint64(n)
	reportsB := b.Actor().Stats().WRsPosted.Load() - uint64(n)
	t.Logf("credit reports alone: %d from a, %d from b", reportsA, reportsB)
	if reportsB == 0 {
		t.Errorf("b received %d messages one way and sent no credit report alone", n/2)
	}
	for _, rt := range []*runtime.Runtime{rtA, rtB} {
		if st := rt.Stats(); st.Completions[verbs.WCRNRRetryExcErr] != 0 {
			t.Errorf("%d SENDs met an empty receive queue", st.Completions[verbs.WCRNRRetryExcErr])
		}
	}

	if err := a.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if m, err := b.Recv(ctx); !errors.Is(err, io.EOF) {
		if m != (runtime.Message{}) {
			imm, ok := m.Imm()
			t.Fatalf("Recv after the peer closed: a message of %d bytes (imm %#x, %v), want io.EOF", len(m.Bytes()), imm, ok)
		}
		t.Fatalf("Recv after the peer closed: %v, want io.EOF", err)
	}
	if !errors.Is(b.Err(), runtime.ErrPeerClosed) {
		t.Errorf("Err after the peer closed: %v, want ErrPeerClosed", b.Err())
	}
}

// checkImmMessages receives immTraffic's n messages on b and checks each;
// it returns the first that is wrong, after receiving them all (the
// sender's credits depend on it). It closes half once half of them arrived
// (or it gave up).
func checkImmMessages(ctx context.Context, b *runtime.Endpoint, n int, half chan<- struct{}) error {
	halfway := sync.OnceFunc(func() { close(half) })
	defer halfway()
	var first error
	for i := range n {
		if i == n/2 {
			halfway()
		}
		m, err := b.Recv(ctx)
		if err != nil {
			return errors.Join(first, fmt.Errorf("b's receive %d of %d: %w", i, n, err))
		}
		kind, data := i%immKinds, m.Bytes()
		imm, hasImm := m.Imm()
		wantLen, wantImm := msgLen(kind), kind != kindSend
		switch {
		case len(data) != wantLen:
			err = fmt.Errorf("%d bytes, want %d", len(data), wantLen)
		case wantLen > 0 && (binary.LittleEndian.Uint64(data) != uint64(i) || binary.LittleEndian.Uint64(data[8:]) != ^uint64(i)):
			err = fmt.Errorf("bytes %x", data)
		case hasImm != wantImm:
			err = fmt.Errorf("immediate data present: %v, want %v", hasImm, wantImm)
		case wantImm && imm != immOf(i):
			err = fmt.Errorf("immediate data %#08x, want %#08x", imm, immOf(i))
		}
		m.Release()
		if err != nil && first == nil {
			first = fmt.Errorf("b's message %d (kind %d): %w", i, kind, err)
		}
	}
	return first
}

// TestSendWithoutHeaderEndsEndpoint: a SEND too short for the runtime's
// header (from a peer that does not speak the wire format) ends the
// receiving endpoint with ErrProtocol instead of reaching Recv as a
// message.
func TestSendWithoutHeaderEndsEndpoint(t *testing.T) {
	rt, a, b := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	// Straight to the QP, past the actor: its completion is one the actor
	// does not know (counted stale).
	wr := verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{runtime.SGE(buf.Slice(0, 3))}}
	if _, err := a.QP().PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	if m, err := b.Recv(ctx); !errors.Is(err, runtime.ErrProtocol) {
		t.Fatalf("Recv: message %v, error %v; want ErrProtocol", m, err)
	}
	if !errors.Is(b.Err(), runtime.ErrProtocol) {
		t.Errorf("Err: %v, want ErrProtocol", b.Err())
	}
	t.Logf("Err: %v", b.Err())
}

// TestSendImmContext: a SendImm whose context ended before it was posted
// fails with the context's error and never reaches the device.
func TestSendImmContext(t *testing.T) {
	rt, a, _ := pair(t)
	buf := alloc(t, rt, 16)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := a.Actor().Stats().WRsPosted.Load()
	if _, err := a.SendImm(ctx, buf.Local(), 7).Wait(ctxT(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("SendImm with a cancelled context: %v, want context.Canceled", err)
	}
	if after := a.Actor().Stats().WRsPosted.Load(); after != before {
		t.Errorf("%d WRs posted for a cancelled SendImm", after-before)
	}
}

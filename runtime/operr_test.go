package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestOperationErrorsSayWhatFailedWhere: a failed operation's error is an
// *runtime.OpError naming the operation, the connection's two ends, the
// remote memory and length, and the cause, in words of the runtime's own
// (no internal package names, no wr_id); errors.Is still reaches the
// status's sentinel, and the operations flushed after it say so too.
func TestOperationErrorsSayWhatFailedWhere(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 4096)
	bad := refOf(t, buf)
	bad.RKey ^= 0xffff // a key no MR has
	_, err := cli.Write(ctx, buf.Slice(0, 64), bad).Wait(ctx)
	var oe *runtime.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("Write with a bad rkey: %T %v, want an *OpError", err, err)
	}
	if !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Errorf("errors.Is(err, verbs.ErrRemoteAccess) is false for %v", err)
	}
	var wce *verbs.WCError
	if !errors.As(err, &wce) {
		t.Errorf("errors.As(err, *verbs.WCError) is false for %v", err)
	}
	if oe.Op != "write" || oe.Len != 64 || oe.RKey != bad.RKey || oe.RemoteAddr != bad.Addr {
		t.Errorf("OpError %+v: want op write, 64 bytes at %#x rkey %#x", oe, bad.Addr, bad.RKey)
	}
	if oe.Local == nil || oe.Remote == nil || oe.Local.String() != cli.LocalAddr().String() ||
		oe.Remote.String() != cli.RemoteAddr().String() || oe.Local.Network() != "rdma" {
		t.Errorf("OpError ends %v -> %v, want the endpoint's %v -> %v", oe.Local, oe.Remote, cli.LocalAddr(), cli.RemoteAddr())
	}
	msg := err.Error()
	// The soft provider's GIDs are made up: the ends are named by QP.
	ends := fmt.Sprintf("qp%#x->qp%#x", cli.LocalAddr().(runtime.Addr).QPN, cli.RemoteAddr().(runtime.Addr).QPN)
	for _, want := range []string{"verbsrt: write of 64 bytes at", ends, "REM_ACCESS_ERR"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "qpactor") || strings.Contains(msg, "wr id") {
		t.Errorf("error %q speaks of the runtime's internals", msg)
	}

	// The connection is in error now: a later operation fails, says which
	// it was and why.
	_, err = cli.Read(ctx, buf.Slice(0, 8), refOf(t, buf)).Wait(ctx)
	if !errors.As(err, &oe) || oe.Op != "read" || !errors.Is(err, runtime.ErrConnFailed) || !errors.Is(err, verbs.ErrRemoteAccess) {
		t.Errorf("Read after the failure: %v, want an *OpError of a read wrapping ErrConnFailed and its cause", err)
	}
	if msg := err.Error(); strings.Contains(msg, "wr id") || !strings.Contains(msg, "connection failed") {
		t.Errorf("Read after the failure: %q", msg)
	}
	rt, cli, _ = pair(t)
	buf = alloc(t, rt, 4096)

	// Errors found before the queue are OpErrors too.
	big := alloc(t, rt, 1<<20)
	_, err = cli.Send(ctx, big.Local()).Wait(ctx)
	if !errors.As(err, &oe) || oe.Op != "send" || !errors.Is(err, runtime.ErrMessageTooLarge) {
		t.Errorf("Send too large: %v, want an *OpError of a send wrapping ErrMessageTooLarge", err)
	}
	_, err = cli.Post(ctx, []runtime.Op{{Opcode: verbs.OpWrite, Local: []runtime.Local{buf.Slice(0, 8)}, Remote: refOf(t, buf)},
		{Opcode: verbs.OpSendImm, Local: []runtime.Local{big.Local()}, Imm: 7}}).Wait(ctx)
	if !errors.As(err, &oe) || oe.Op != "send-with-imm" || oe.Batch != 2 || !errors.Is(err, runtime.ErrMessageTooLarge) {
		t.Errorf("Post of a SEND too large: %v, want an *OpError of its send-with-imm wrapping ErrMessageTooLarge", err)
	}
	tooMany := make([]runtime.Op, 4096)
	for i := range tooMany {
		tooMany[i] = runtime.Op{Opcode: verbs.OpWrite, Local: []runtime.Local{buf.Slice(0, 8)}, Remote: refOf(t, buf)}
	}
	_, err = cli.Post(ctx, tooMany).Wait(ctx)
	if !errors.As(err, &oe) || oe.Batch != len(tooMany) || !errors.Is(err, verbs.ErrInvalidArgument) || !strings.Contains(err.Error(), "send queue") {
		t.Errorf("Post of more WRs than the send queue holds: %v, want an *OpError wrapping ErrInvalidArgument naming the send queue", err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err = cli.FetchAdd(ended, refOf(t, buf), 1).Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("FetchAdd with an ended context: %v, want context.Canceled", err)
	}
	if err := cli.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = cli.CompareAndSwap(ctx, refOf(t, buf), 0, 1).Wait(ctx)
	if !errors.As(err, &oe) || oe.Op != "compare-and-swap" || !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("CompareAndSwap after Close: %v, want an *OpError wrapping ErrClosed", err)
	}
	if strings.Contains(err.Error(), "qpactor") {
		t.Errorf("error %q speaks of the runtime's internals", err)
	}
	t.Logf("e.g. %v", err)
}

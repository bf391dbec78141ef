package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestMisusedArgumentsMatchInvalidArgument: an atomic at an unaligned
// address and a flag a WR's opcode does not take are refused before the
// device, with errors that match verbs.ErrInvalidArgument, and that say
// the rule without the runtime's bookkeeping (a WR's index and wr_id) or
// an address the soft provider invents for its GIDs.
func TestMisusedArgumentsMatchInvalidArgument(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	ref := refOf(t, buf)
	for name, f := range map[string]runtime.Future{
		"unaligned fetch-and-add":    cli.FetchAdd(ctx, ref.At(4), 1),
		"unaligned compare-and-swap": cli.CompareAndSwap(ctx, ref.At(1), 0, 1),
		"unaligned atomic in a post": cli.Post(ctx, []runtime.Op{{Opcode: verbs.OpAtomicFetchAdd, Remote: ref.At(2), CompareAdd: 1}}),
		"solicited write":            cli.Post(ctx, []runtime.Op{{Opcode: verbs.OpWrite, Flags: verbs.SendSolicited, Local: []runtime.Local{buf.Slice(0, 8)}, Remote: ref}}),
	} {
		_, err := f.Wait(ctx)
		if !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an error matching ErrInvalidArgument", name, err)
			continue
		}
		for _, noise := range []string{"wr 0", "(id 0x", "10.77."} {
			if strings.Contains(err.Error(), noise) {
				t.Errorf("%s: %q says %q", name, err, noise)
			}
		}
	}
	if err := cli.Err(); err != nil {
		t.Fatalf("the endpoint ended: %v", err)
	}
}

// TestNilEndpointAndListener: methods of a nil *Endpoint or *Listener
// return an error, as a nil *net.TCPConn's do, instead of panicking.
func TestNilEndpointAndListener(t *testing.T) {
	ctx := context.Background()
	var ep *runtime.Endpoint
	var ln *runtime.Listener
	check := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, verbs.ErrInvalidArgument) || !strings.Contains(err.Error(), "nil") {
			t.Errorf("%s: %v, want an error naming the nil receiver, matching ErrInvalidArgument", call, err)
		}
	}
	var l runtime.Local
	var r runtime.RemoteRef
	for call, f := range map[string]runtime.Future{
		"Write":          ep.Write(ctx, l, r),
		"Read":           ep.Read(ctx, l, r),
		"Send":           ep.Send(ctx, l),
		"SendBytes":      ep.SendBytes(ctx, []byte("x")),
		"SendImm":        ep.SendImm(ctx, l, 1),
		"WriteImm":       ep.WriteImm(ctx, l, r, 1),
		"CompareAndSwap": ep.CompareAndSwap(ctx, r, 0, 1),
		"FetchAdd":       ep.FetchAdd(ctx, r, 1),
		"Post":           ep.Post(ctx, []runtime.Op{{Opcode: verbs.OpWrite}}),
	} {
		_, err := f.Wait(ctx)
		check("Endpoint."+call, err)
	}
	_, err := ep.Recv(ctx)
	check("Endpoint.Recv", err)
	check("Endpoint.Close", ep.Close(ctx))
	check("Endpoint.CloseWithError", ep.CloseWithError(ctx, 1, "why"))
	check("Endpoint.Err", ep.Err())
	select {
	case <-ep.Done():
	default:
		t.Error("Endpoint.Done of a nil endpoint is not closed")
	}
	if ep.LocalAddr() != nil || ep.RemoteAddr() != nil {
		t.Error("a nil endpoint has addresses")
	}
	_, err = ln.Accept(ctx)
	check("Listener.Accept", err)
	check("Listener.Close", ln.Close())
	if ln.Addr() != nil {
		t.Error("a nil listener has an address")
	}
}

package runtime_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestPostRefusesUnsupportedOpcodes: an opcode the runtime does not carry
// on an endpoint's QP (memory windows, send-with-invalidate, TSO, a value
// no opcode has) is refused before it reaches the device, with an error
// naming it, and the connection stays up for the next operation.
func TestPostRefusesUnsupportedOpcodes(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 64)
	ref := refOf(t, buf)
	for _, opcode := range []verbs.Opcode{verbs.OpLocalInv, verbs.OpBindMW, verbs.OpSendInv, verbs.OpTSO, verbs.Opcode(200)} {
		_, err := cli.Post(ctx, []runtime.Op{{Opcode: opcode, Local: []runtime.Local{buf.Slice(0, 8)}, Remote: ref}}).Wait(ctx)
		if !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("Post of %v: %v, want ErrInvalidArgument", opcode, err)
			continue
		}
		if !strings.Contains(err.Error(), opcode.String()) {
			t.Errorf("Post of %v: %q does not name the opcode", opcode, err)
		}
	}
	if _, err := cli.Write(ctx, buf.Slice(0, 8), ref).Wait(ctx); err != nil {
		t.Fatalf("a WRITE after the refusals: %v", err)
	}
	if err := cli.Err(); err != nil {
		t.Fatalf("the endpoint ended: %v", err)
	}
}

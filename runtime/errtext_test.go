package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
)

// maxErrorText bounds the text of any error or panic of the runtime's
// door: an operation, its arguments and the rule it broke fit a log line.
const maxErrorText = 400

// errorText returns the text of what fn returned or panicked with.
func errorText(fn func() error) (text string, got bool) {
	defer func() {
		if r := recover(); r != nil {
			text, got = fmt.Sprint(r), true
		}
	}()
	if err := fn(); err != nil {
		return err.Error(), true
	}
	return "", false
}

// doorErrorCase is one misuse of the door and a word its error must hold:
// the operation it names or the rule it states.
type doorErrorCase struct {
	name string
	want string
	call func() error
}

// checkDoorErrors runs the cases: each must fail, with text of at most
// maxErrorText bytes that holds its word and none of secret's bytes,
// neither as they are nor as fmt prints a byte slice.
func checkDoorErrors(t *testing.T, cases []doorErrorCase, secret []byte) {
	t.Helper()
	leaks := []string{string(secret[:16]), strings.Trim(fmt.Sprint(secret[:16]), "[]")}
	for _, c := range cases {
		text, got := errorText(c.call)
		if !got {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if len(text) > maxErrorText {
			t.Errorf("%s: an error of %d bytes, want at most %d: %.200s...", c.name, len(text), maxErrorText, text)
		}
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s: the error holds the buffer's bytes: %.200s", c.name, text)
			}
		}
		if !strings.Contains(text, c.want) {
			t.Errorf("%s: %q does not say %q", c.name, text, c.want)
		}
	}
}

// TestErrorsCarryNoBufferBytes: an error (or a panic) of the door names the
// call and the rule broken in a bounded text, and never the memory the
// application handed it, however large.
func TestErrorsCarryNoBufferBytes(t *testing.T) {
	rt, cli, _ := pair(t)
	ctx := ctxT(t)
	buf := alloc(t, rt, 1<<20)
	secret := buf.Bytes()
	for i := range secret {
		secret[i] = "SECRET-"[i%7]
	}
	small := alloc(t, rt, 64)
	ref := refOf(t, small)
	freed := alloc(t, rt, 64)
	freed.Free()
	other := alloc(t, newRuntime(t), 64)
	wait := func(f runtime.Future) error { _, err := f.Wait(ctx); return err }
	checkDoorErrors(t, []doorErrorCase{
		{"expose with no rights", "expose", func() error { _, err := buf.ExposeRange(0, 10, 0); return err }},
		{"expose with unknown rights", "rights", func() error { _, err := buf.Expose(0x80); return err }},
		{"expose of nothing", "positive", func() error { _, err := buf.ExposeRange(0, 0, runtime.RemoteRead); return err }},
		{"expose past the end", "outside", func() error { _, err := buf.ExposeRange(1, 1<<20, runtime.RemoteRead); return err }},
		{"expose of freed memory", "expose", func() error { _, err := freed.Expose(runtime.RemoteRead); return err }},
		{"slice past the end", "Slice", func() error { buf.Slice(1<<20, 1); return nil }},
		{"bytes after free", "Bytes", func() error { freed.Bytes(); return nil }},
		{"write larger than the remote", "write", func() error { return wait(cli.Write(ctx, buf.Local(), ref)) }},
		{"read larger than the remote", "read", func() error { return wait(cli.Read(ctx, buf.Local(), ref)) }},
		{"send larger than the peer takes", "send", func() error { return wait(cli.Send(ctx, buf.Local())) }},
		{"write of another runtime's memory", "another runtime", func() error { return wait(cli.Write(ctx, other.Local(), ref)) }},
		{"post larger than the remote", "write", func() error {
			return wait(cli.Post(ctx, []runtime.Op{{Opcode: 0, Local: []runtime.Local{buf.Local()}, Remote: ref}}))
		}},
		{"alloc of nothing", "Alloc", func() error { _, err := rt.Alloc(0); return err }},
		{"wait of the zero Future", "zero Future", func() error { return wait(runtime.Future{}) }},
		{"nil context", "Context", func() error { _, err := cli.Recv(nilContext()); return err }},
	}, secret)
}

// nilContext returns a nil context.Context, as a careless caller passes one.
func nilContext() context.Context { return nil }

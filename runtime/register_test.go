package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// TestAllocSizing: Alloc of no bytes is an invalid argument; the arena
// grows on demand and, at its limit, says which option raises it, for
// Alloc and for a connection's receive buffers.
func TestAllocSizing(t *testing.T) {
	srvRT, rt := twoHosts(t, runtime.WithMemoryLimit(8<<20))
	for _, n := range []int{0, -1} {
		if _, err := rt.Alloc(n); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("Alloc(%d): %v, want ErrInvalidArgument", n, err)
		}
	}
	if got := rt.ArenaSize(); got != 0 {
		t.Errorf("arena of %d bytes before any Alloc", got)
	}
	small := alloc(t, rt, 64)
	if got := rt.ArenaSize(); got != 4<<20 {
		t.Errorf("arena of %d bytes after Alloc(64), want one chunk of 4 MiB", got)
	}
	if _, err := rt.Alloc(16 << 20); !errors.Is(err, runtime.ErrNoMemory) || !bytes.Contains([]byte(err.Error()), []byte("WithMemoryLimit")) {
		t.Errorf("Alloc past the limit: %v, want ErrNoMemory naming WithMemoryLimit", err)
	}
	big := alloc(t, rt, 4<<20) // a chunk of its own
	if got := rt.ArenaSize(); got != 8<<20 {
		t.Errorf("arena of %d bytes, want 8 MiB", got)
	}
	ln, err := srvRT.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			if _, err := ln.Accept(context.Background()); err != nil {
				return
			}
		}
	}()
	// The first chunk has room for a few hundred connections (each takes
	// its scratch and the receive buffers of its initial window from the
	// shared pool, which grows 64 buffers at a time), not for thousands.
	var dialErr error
	for range 4000 {
		if _, dialErr = rt.Dial(ctxT(t), ln.Addr().String()); dialErr != nil {
			break
		}
	}
	if !errors.Is(dialErr, runtime.ErrNoMemory) || !bytes.Contains([]byte(dialErr.Error()), []byte("WithMemoryLimit")) {
		t.Errorf("Dial past the limit: %v, want ErrNoMemory naming WithMemoryLimit", dialErr)
	}
	// The connections that were made keep every credit backed by a
	// posted receive, the pool short of memory as it is.
	if err := runtime.CheckRecvPools(rt); err != nil {
		t.Error(err)
	}
	small.Free()
	big.Free()

	// A limit below one chunk maps the limit, not a chunk it cannot have.
	tiny := newRuntime(t, runtime.WithMemoryLimit(64<<10))
	if _, err := tiny.Alloc(64); err != nil {
		t.Errorf("Alloc(64) under a 64 KiB limit: %v", err)
	}
	if _, err := tiny.Alloc(128 << 10); !errors.Is(err, runtime.ErrNoMemory) {
		t.Errorf("Alloc(128 KiB) under a 64 KiB limit: %v, want ErrNoMemory", err)
	}
	if _, err := runtime.New(runtime.WithMemoryLimit(0)); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("WithMemoryLimit(0): %v, want ErrInvalidArgument", err)
	}
	// (Before, every error of New after its first step was a nil
	// dereference in its own cleanup.)
	if _, err := runtime.New(runtime.WithDevice("no-such-device")); !errors.Is(err, verbs.ErrNotFound) {
		t.Errorf("New on a missing device: %v, want ErrNotFound", err)
	}
}

// TestRegisterOwnMemory: memory of the application's own (here a mapped
// file) is registered, used as an operation's buffer and exposed, and
// stays the application's after Free.
func TestRegisterOwnMemory(t *testing.T) {
	rtA, rtB := twoHosts(t)
	ctx := ctxT(t)
	f, err := os.CreateTemp(t.TempDir(), "region")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	file, err := rtB.Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := file.ExposeRange(4096, 4096, runtime.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	cli, srv := connectRuntimes(t, rtA, rtB)
	src := alloc(t, rtA, 4096)
	fill(src.Bytes(), 0x42)
	if _, err := cli.Write(ctx, src.Local(), exp.RemoteRef()).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// And as a local buffer: SEND the first page from the file.
	copy(mem, "from the file")
	if _, err := srv.Send(ctx, file.Slice(0, 13)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := cli.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Bytes()) != "from the file" {
		t.Fatalf("received %q", m.Bytes())
	}
	m.Release()
	file.Free()
	got := make([]byte, 4096)
	if _, err := f.ReadAt(got, 4096); err != nil {
		t.Fatal(err)
	}
	wantAll(t, "the file's second page", got, 0x42)
	mem[0] = 1 // still the application's, still mapped

	if _, err := rtB.Register(nil); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("Register(nil): %v, want ErrInvalidArgument", err)
	}
	// Go's heap is refused: the collector may reuse it under the device.
	if _, err := rtB.Register(make([]byte, 4096)); !errors.Is(err, verbs.ErrGoMemory) {
		t.Errorf("Register of Go heap memory: %v, want verbs.ErrGoMemory", err)
	} else {
		t.Logf("Register of Go heap memory: %v", err)
	}
}

// TestGatherAndSendBytes: a header and a block in one WRITE and in one
// SEND; a small []byte sent as a copy; more ranges than MaxGather refused.
func TestGatherAndSendBytes(t *testing.T) {
	rt, a, b := pair(t)
	ctx := ctxT(t)
	hdr, blk := alloc(t, rt, 16), alloc(t, rt, 100)
	copy(hdr.Bytes(), "header:")
	fill(blk.Bytes(), 'x')
	dst := alloc(t, rt, 256)
	c, err := a.Post(ctx, []runtime.Op{{Opcode: verbs.OpWrite, Local: []runtime.Local{hdr.Slice(0, 7), blk.Local()}, Remote: refOf(t, dst)}}).Wait(ctx)
	if err != nil || c.ByteLen != 107 {
		t.Fatalf("gathered WRITE: %+v, %v", c, err)
	}
	want := "header:" + string(bytes.Repeat([]byte{'x'}, 100))
	if got := string(dst.Bytes()[:107]); got != want {
		t.Fatalf("the gathered WRITE wrote %q", got)
	}
	if _, err := a.Post(ctx, []runtime.Op{{Opcode: verbs.OpSend, Local: []runtime.Local{hdr.Slice(0, 7), blk.Slice(0, 3)}}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SendBytes(ctx, []byte("a copy")).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"header:xxx", "a copy"} {
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Bytes()) != want {
			t.Fatalf("received %q, want %q", m.Bytes(), want)
		}
		m.Release()
	}
	back := alloc(t, rt, 107)
	if _, err := a.Post(ctx, []runtime.Op{{Opcode: verbs.OpRead, Local: []runtime.Local{back.Slice(0, 7), back.Slice(7, 100)}, Remote: refOf(t, dst).Slice(0, 107)}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if string(back.Bytes()) != want {
		t.Fatalf("the scattered READ read %q", back.Bytes())
	}
	many := make([]runtime.Local, runtime.MaxGather+1)
	for i := range many {
		many[i] = blk.Slice(i, 1)
	}
	if _, err := a.Post(ctx, []runtime.Op{{Opcode: verbs.OpWrite, Local: many, Remote: refOf(t, dst)}}).Wait(ctx); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("a WRITE of %d ranges: %v, want ErrInvalidArgument", len(many), err)
	}
	if runtime.Uses(blk) != 0 {
		t.Errorf("%d uses of a buffer left after every operation resolved", runtime.Uses(blk))
	}
}

// TestRemoteRefEncoding: a reference round-trips through bytes; a wrong
// length, an unknown version and a wrapping range are refused; At and
// Slice refuse to leave the reference.
func TestRemoteRefEncoding(t *testing.T) {
	ref := runtime.RemoteRef{Addr: 0x7f00_0000_1000, RKey: 0xabcdef, Len: 5 << 30}
	b, err := ref.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got runtime.RemoteRef
	if err := got.UnmarshalBinary(b); err != nil || got != ref {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	bad := map[string][]byte{
		"short":   b[:len(b)-1],
		"long":    append(bytes.Clone(b), 0),
		"version": append([]byte{9}, b[1:]...),
		"wraps":   func() []byte { r := ref; r.Addr = ^uint64(0) - 4; e, _ := r.MarshalBinary(); return e }(),
	}
	for name, enc := range bad {
		if err := got.UnmarshalBinary(enc); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if r := ref.At(4096); r.Addr != ref.Addr+4096 || r.Len != ref.Len-4096 {
		t.Errorf("At: %+v", r)
	}
	// A decoded reference of any length works with At (a peer's bytes
	// cannot make it panic).
	huge := runtime.RemoteRef{Addr: 0, RKey: 1, Len: 1 << 63}
	enc, _ := huge.MarshalBinary()
	if err := got.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if r := got.At(0); r != huge {
		t.Errorf("At(0) of a reference of 2^63 bytes: %+v", r)
	}
	for name, f := range map[string]func(){
		"At past the end":      func() { ref.At(int(ref.Len) + 1) },
		"At negative":          func() { ref.At(-1) },
		"Slice past the end":   func() { ref.Slice(int(ref.Len)-4, 8) },
		"Slice negative count": func() { ref.Slice(0, -1) },
	} {
		if recoverErr(f) == nil {
			t.Errorf("%s did not panic", name)
		}
	}
}

// TestAllocRoundingAndTheLimit: a block of a chunk's size or more maps
// what was asked (rounded to a page), not the next power of two, and is
// reused once freed; when the application's Buffers hold the arena at its
// limit, Dial fails with ErrNoMemory in the terms the application knows
// (the memory limit, the option, what holds the memory), not with an
// internal Alloc size.
func TestAllocRoundingAndTheLimit(t *testing.T) {
	const limit = 16 << 20
	rt := newRuntime(t, runtime.WithMemoryLimit(limit))
	page := os.Getpagesize()
	n := 9<<20 + 1
	big := alloc(t, rt, n)
	want := (n + page - 1) &^ (page - 1)
	if got := rt.ArenaSize(); got != want {
		t.Fatalf("Alloc(%d) mapped %d bytes, want %d (the size rounded up to a page)", n, got, want)
	}
	if len(big.Bytes()) != n {
		t.Fatalf("Alloc(%d) returned %d bytes", n, len(big.Bytes()))
	}
	big.Bytes()[n-1] = 1
	big.Free()
	again := alloc(t, rt, n-page)
	if got := rt.ArenaSize(); got != want {
		t.Errorf("Alloc(%d) after freeing Alloc(%d): %d bytes mapped, want the freed mapping reused (%d)", n-page, n, got, want)
	}
	if again.Bytes()[n-page-1] != 0 {
		t.Error("a reused mapping is not zeroed")
	}
	// With 9 MiB held, a connection finds room for its buffers.
	connect(t, rt)
	// The application takes the rest, down to the smallest block.
	var held []*runtime.Buffer
	for size := 64 << 10; size >= 64; size /= 2 {
		for {
			b, err := rt.Alloc(size)
			if errors.Is(err, runtime.ErrNoMemory) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, b)
		}
	}
	// Connections may still find idle receive buffers in the shared pool
	// (it grows 64 at a time), but not their scratch for long.
	var err error
	for range 64 {
		if _, _, err = runtime.Pipe(ctxT(t), rt, rt); err != nil {
			break
		}
	}
	if !errors.Is(err, runtime.ErrNoMemory) {
		t.Fatalf("a connection with the arena at its limit: %v, want ErrNoMemory", err)
	}
	msg := err.Error()
	for _, want := range []string{"WithMemoryLimit", fmt.Sprintf("limit of %d bytes", limit), fmt.Sprintf("%d Buffers", len(held)+1)} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q: %s", want, msg)
		}
	}
	if regexp.MustCompile(`Alloc\(\d`).MatchString(msg) {
		t.Errorf("the error names an internal Alloc: %s", msg)
	}
	t.Log(msg)
}

package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
)

// FuzzExposure: whatever the exposed range and rights, whether the
// exposure was revoked, and whatever access a peer tries with its key (a
// READ, WRITE or fetch-and-add at any offset and length, inside the
// exposure or not), the access succeeds only when the range holds it, the
// right was granted and the key not revoked; and no byte outside what a
// successful access may touch changes. On soft.
//
//	go test -run '^$' -fuzz FuzzExposure ./runtime
func FuzzExposure(f *testing.F) {
	f.Add(uint16(64), uint16(256), uint8(runtime.RemoteWrite), false, uint8(1), int16(64), uint16(256))               // all inside
	f.Add(uint16(64), uint16(256), uint8(runtime.RemoteWrite), false, uint8(1), int16(65), uint16(256))               // one byte past
	f.Add(uint16(64), uint16(256), uint8(runtime.RemoteWrite), false, uint8(1), int16(63), uint16(8))                 // one byte before
	f.Add(uint16(64), uint16(256), uint8(runtime.RemoteRead), false, uint8(1), int16(64), uint16(8))                  // no write right
	f.Add(uint16(64), uint16(256), uint8(runtime.RemoteWrite), true, uint8(1), int16(64), uint16(8))                  // revoked
	f.Add(uint16(0), uint16(4096), uint8(runtime.RemoteAtomic), false, uint8(2), int16(4088), uint16(8))              // atomic at the end
	f.Add(uint16(8), uint16(16), uint8(runtime.RemoteRead|runtime.RemoteWrite), false, uint8(2), int16(8), uint16(8)) // atomic, no right
	f.Add(uint16(100), uint16(1), uint8(runtime.RemoteRead), false, uint8(0), int16(100), uint16(1))                  // one byte READ
	const size = 4096
	rtA, rtB := twoHosts(f)
	target := alloc(f, rtB, size)
	local := alloc(f, rtA, size)
	var cli, srv *runtime.Endpoint
	f.Fuzz(func(t *testing.T, off, n uint16, rights uint8, revoke bool, op uint8, at int16, length uint16) {
		ctx := ctxT(t)
		off, n = off%size, n%(size+1)
		fill(target.Bytes(), 0xee)
		fill(local.Bytes(), 0x11)
		exp, err := target.ExposeRange(int(off), int(n), runtime.Rights(rights))
		if valid := rights != 0 && rights&^7 == 0 && n > 0 && int(off)+int(n) <= size; !valid {
			if err == nil {
				t.Fatalf("ExposeRange(%d, %d, %v) accepted", off, n, runtime.Rights(rights))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer exp.Close()
		ref := exp.RemoteRef()
		if revoke {
			exp.Close()
		}
		if cli == nil || cli.Err() != nil {
			if cli != nil {
				closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				cli.Close(closeCtx)
				srv.Close(closeCtx)
				cancel()
			}
			cli, srv = connectRuntimes(t, rtA, rtB)
		}
		// The access, relative to the exposure's start; a forged length, so
		// only the device decides.
		length = length % (size + 1)
		kind := op % 3
		if kind == 2 {
			length = 8
		}
		addr := ref.Addr + uint64(int64(at))
		remote := runtime.RemoteRef{Addr: addr, RKey: ref.RKey, Len: uint64(length)}
		start := int(off) + int(at) // in target
		var fut runtime.Future
		var need runtime.Rights
		switch kind {
		case 0:
			need, fut = runtime.RemoteRead, cli.Read(ctx, local.Slice(0, int(length)), remote)
		case 1:
			need, fut = runtime.RemoteWrite, cli.Write(ctx, local.Slice(0, int(length)), remote)
		default:
			need, fut = runtime.RemoteAtomic, cli.FetchAdd(ctx, remote, 1)
		}
		_, err = fut.Wait(ctx)
		inside := at >= 0 && int(at)+int(length) <= int(n)
		misaligned := kind == 2 && addr%8 != 0
		allowed := length == 0 || (!revoke && inside && runtime.Rights(rights)&need != 0)
		switch {
		case misaligned:
			if !errors.Is(err, verbs.ErrInvalidWR) {
				t.Fatalf("misaligned atomic: %v, want it refused before the device", err)
			}
		case allowed && err != nil:
			t.Fatalf("access [%d, %d+%d) of an exposure of [%d, %d+%d) %v (revoked %v): %v", start, start, length, off, off, n, runtime.Rights(rights), revoke, err)
		case !allowed && err == nil:
			t.Fatalf("access [%d, %d+%d) of an exposure of [%d, %d+%d) %v (revoked %v) succeeded", start, start, length, off, off, n, runtime.Rights(rights), revoke)
		case !allowed && !errors.Is(err, verbs.ErrRemoteAccess):
			t.Fatalf("refused access: %v, want REM_ACCESS_ERR", err)
		}
		// What may have changed: the accessed range of a successful WRITE
		// or atomic.
		want := bytes.Repeat([]byte{0xee}, size)
		if err == nil && length > 0 && kind != 0 {
			lo, hi := start, start+int(length)
			if kind == 1 {
				copy(want[lo:hi], local.Bytes()[:length])
			} else {
				copy(want[lo:hi], target.Bytes()[lo:hi]) // the sum's bytes
			}
		}
		if !bytes.Equal(target.Bytes(), want) {
			t.Fatalf("the target changed outside what a successful access may touch")
		}
	})
}

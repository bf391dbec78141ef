package bench

import (
	"context"
	"fmt"
	"testing"

	vrt "github.com/verbsrt/verbsrt/runtime"
)

// BenchmarkExpose measures what remote access costs the application that
// grants it: expose+revoke is Buffer.ExposeRange with READ and
// WRITE rights and Exposure.Close, one memory region registered and
// deregistered; alloc+free is Alloc and Free of the same size, the local
// cost beside it; write is one 64-byte WRITE and its Wait, for scale. On
// the soft provider, in one run. (bench/rxe-mrcost measures the same on
// Soft-RoCE, against memory windows.)
func BenchmarkExpose(b *testing.B) {
	v := newViaRuntime(b, 1, runtimeOpts()...)
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		buf, err := v.rt.Alloc(size)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("expose+revoke/size=%s", sizeName(size)), func(b *testing.B) {
			for b.Loop() {
				e, err := buf.ExposeRange(0, size, vrt.RemoteRead|vrt.RemoteWrite)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		buf.Free()
		b.Run(fmt.Sprintf("alloc+free/size=%s", sizeName(size)), func(b *testing.B) {
			for b.Loop() {
				buf, err := v.rt.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				buf.Free()
			}
		})
	}
	b.Run("write/size=64", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if _, err := v.cli.Write(ctx, v.locals[0], v.remotes[0]).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dM", n>>20)
	}
	return fmt.Sprintf("%dK", n>>10)
}

//go:build unix

package verbs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// Package-level variables: bssBuf in the bss, dataBuf (initialized) in the
// data of the binary.
var (
	bssBuf  [4096]byte
	dataBuf = [64]byte{1, 2, 3}
)

func TestCheckRegistrableRefusesGoMemory(t *testing.T) {
	small := make([]byte, 1)
	heap := make([]byte, 4096)
	large := make([]byte, 4<<20) // a span of its own
	boxed := new([24]byte)
	for _, tc := range []struct {
		name, where string
		buf         []byte
	}{
		{"make 1 byte", "Go heap", small},
		{"make 4 KiB", "Go heap", heap},
		{"make 4 MiB", "Go heap", large},
		{"the middle of a heap slice", "Go heap", heap[100:200]},
		{"new array", "Go heap", boxed[:]},
		{"package-level array (bss)", "package-level variable", bssBuf[:]},
		{"package-level array (data)", "package-level variable", dataBuf[:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verbs.CheckRegistrable(tc.buf)
			if !errors.Is(err, verbs.ErrGoMemory) || !errors.Is(err, verbs.ErrInvalidArgument) ||
				!errors.Is(err, syscall.EINVAL) {
				t.Fatalf("CheckRegistrable: %v, want an error matching ErrGoMemory, ErrInvalidArgument and EINVAL", err)
			}
			var e *verbs.Error
			if !errors.As(err, &e) || e.Op != "ibv_reg_mr" {
				t.Errorf("CheckRegistrable: %#v, want a *verbs.Error of ibv_reg_mr", err)
			}
			// It says why, and what to use instead.
			for _, s := range []string{tc.where, "verbs.NewArena", "syscall.Mmap", "malloc"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("CheckRegistrable: %q does not say %q", err, s)
				}
			}
		})
	}
	runtime.KeepAlive(small)
	runtime.KeepAlive(large)
}

func TestCheckRegistrableAcceptsOtherMemory(t *testing.T) {
	ar, err := verbs.NewArena(3 * os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	f, err := os.Create(filepath.Join(t.TempDir(), "mapped"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	file, err := syscall.Mmap(int(f.Fd()), 0, 8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(file)
	for _, tc := range []struct {
		name string
		buf  []byte
	}{
		{"arena", ar.Bytes()},
		{"one byte of an arena", ar.Bytes()[4097:4098]},
		{"the end of an arena", ar.Bytes()[ar.Len()-10:]},
		{"mmap of a file", file},
	} {
		if err := verbs.CheckRegistrable(tc.buf); err != nil {
			t.Errorf("%s: CheckRegistrable: %v, want nil", tc.name, err)
		}
	}
}

func TestCheckRegistrableEmpty(t *testing.T) {
	ar, err := verbs.NewArena(1)
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	for _, buf := range [][]byte{nil, {}, ar.Bytes()[:0]} {
		err := verbs.CheckRegistrable(buf)
		if !errors.Is(err, verbs.ErrInvalidArgument) || errors.Is(err, verbs.ErrGoMemory) {
			t.Errorf("CheckRegistrable(%d bytes, cap %d): %v, want ErrInvalidArgument only", len(buf), cap(buf), err)
		}
	}
}

// The check leaves nothing behind: the cleanup it attaches to heap memory
// is stopped, so the memory is freed as any other.
func TestCheckRegistrableLeavesNoCleanup(t *testing.T) {
	freed := make(chan struct{})
	func() {
		buf := make([]byte, 64<<10)
		runtime.AddCleanup(&buf[0], func(ch chan struct{}) { close(ch) }, freed)
		for range 100 {
			if verbs.CheckRegistrable(buf) == nil {
				t.Fatal("heap memory accepted")
			}
		}
	}()
	for range 100 {
		runtime.GC()
		select {
		case <-freed:
			return
		default:
		}
		runtime.Gosched()
	}
	t.Fatal("memory checked by CheckRegistrable was not freed after 100 collections")
}

func BenchmarkCheckRegistrable(b *testing.B) {
	ar, err := verbs.NewArena(4096)
	if err != nil {
		b.Fatal(err)
	}
	defer ar.Close()
	for _, bc := range []struct {
		name string
		buf  []byte
	}{{"arena", ar.Bytes()}, {"heap", make([]byte, 4096)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_ = verbs.CheckRegistrable(bc.buf)
			}
		})
	}
}

// CheckRegistrable tells memory a device may keep from memory the Go
// runtime owns, which every provider's RegMR refuses.
func ExampleCheckRegistrable() {
	arena, err := verbs.NewArena(1 << 16)
	if err != nil {
		panic(err)
	}
	defer arena.Close()
	fmt.Println("arena:", verbs.CheckRegistrable(arena.Bytes()))

	err = verbs.CheckRegistrable(make([]byte, 1<<16))
	fmt.Println("make:", errors.Is(err, verbs.ErrGoMemory), errors.Is(err, verbs.ErrInvalidArgument))
	// Output:
	// arena: <nil>
	// make: true true
}

package rlimit

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// Limit is one resource limit: the soft limit the kernel enforces (Cur)
// and the hard one the process may raise it to (Max); Infinity is
// "unlimited". Known is false where the system does not tell.
type Limit struct {
	Cur, Max uint64
	Known    bool
}

// Infinity is an unlimited Cur or Max.
const Infinity = ^uint64(0)

// What the runtime registers, and the kernel locks: the runtime sizes its
// arena by these, and the doctor checks RLIMIT_MEMLOCK against them.
const (
	// DefaultMemoryLimit is the runtime's WithMemoryLimit default, 1 GiB:
	// what a runtime made without the option may register.
	DefaultMemoryLimit = 1 << 30
	// ArenaChunk is how much the runtime's arena registers at a time,
	// 4 MiB, or the memory limit when smaller: what its first Alloc or
	// connection registers.
	ArenaChunk = 4 << 20
)

// Names of the limits in /proc/self/limits.
const (
	Memlock = "Max locked memory"
	Nofile  = "Max open files"
)

// Read returns the process's limit called name (Memlock, Nofile), or a
// Limit that is not Known where /proc/self/limits cannot say.
func Read(name string) Limit {
	f, err := os.Open("/proc/self/limits")
	if err != nil {
		return Limit{}
	}
	defer f.Close()
	return Parse(f, name)
}

// Parse finds the limit called name in r, written in /proc/PID/limits'
// format ("Max locked memory  65536  65536  bytes").
func Parse(r io.Reader, name string) Limit {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return Limit{}
		}
		cur, ok1 := value(f[0])
		max, ok2 := value(f[1])
		return Limit{Cur: cur, Max: max, Known: ok1 && ok2}
	}
	return Limit{}
}

func value(s string) (uint64, bool) {
	if s == "unlimited" {
		return Infinity, true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

package runtime

import (
	"bufio"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// TestMemlockLimitParse reads RLIMIT_MEMLOCK from /proc/PID/limits' format:
// numbers, "unlimited", and nothing known from a file without the line.
func TestMemlockLimitParse(t *testing.T) {
	const limits = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max open files            1024                 1048576              files     
Max locked memory         65536                8388608              bytes     
Max address space         unlimited            unlimited            bytes     
`
	for _, tc := range []struct {
		file, name string
		want       rlimit
	}{
		{limits, "Max locked memory", rlimit{cur: 65536, max: 8388608, known: true}},
		{limits, "Max open files", rlimit{cur: 1024, max: 1048576, known: true}},
		{limits, "Max address space", rlimit{cur: rlimInfinity, max: rlimInfinity, known: true}},
		{strings.ReplaceAll(limits, "65536 ", "unlimited "), "Max locked memory", rlimit{cur: rlimInfinity, max: 8388608, known: true}},
		{"Limit Soft Limit Hard Limit Units\n", "Max locked memory", rlimit{}},
	} {
		if got := parseLimit(bufio.NewScanner(strings.NewReader(tc.file)), tc.name); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if l := readMemlock(); !l.known {
		t.Errorf("this process's RLIMIT_MEMLOCK is not known: %+v", l)
	}
}

// TestMemlockNoMemoryMessage: the error of a registration refused with
// ENOMEM says, by the limit the process has, what to do: with a soft limit
// below the need and a hard one above, ulimit -l with the need in KiB
// rounded up; with both below, that raising it takes privilege; with the
// soft limit at or above what the arena needed, that other locked memory
// takes the rest; unlimited, that the limit is not the cause.
func TestMemlockNoMemoryMessage(t *testing.T) {
	cause := verbs.FromErrno("ibv_reg_mr", syscall.ENOMEM, "")
	for _, tc := range []struct {
		name      string
		limit     rlimit
		want, not []string
	}{
		{"soft below, hard above", rlimit{cur: 64 << 10, max: rlimInfinity, known: true},
			[]string{"RLIMIT_MEMLOCK) is 65536 bytes (64 KiB)", "needed 4194404 bytes (4096 KiB)", "ulimit -l 4097", "WithMemoryLimit"},
			[]string{"takes privilege"}},
		{"both below", rlimit{cur: 64 << 10, max: 64 << 10, known: true},
			[]string{"hard limit is 65536 bytes (64 KiB) too", "takes privilege", "CAP_IPC_LOCK", "ulimit -l 4097"},
			nil},
		{"hard limit exactly the need", rlimit{cur: 64 << 10, max: 4194404, known: true},
			[]string{"ulimit -l 4097"}, []string{"takes privilege"}},
		{"soft limit above the arena's need", rlimit{cur: 8 << 20, max: 8 << 20, known: true},
			[]string{"of 8388608 bytes (8192 KiB), above the 4194404 bytes (4096 KiB)", "registered itself", "ulimit -l unlimited"},
			[]string{"ulimit -l 4097", "WithMemoryLimit"}},
		{"soft limit one byte below the need", rlimit{cur: 4194403, max: rlimInfinity, known: true},
			[]string{"is 4194403 bytes (4096 KiB) and the runtime needed 4194404 bytes (4096 KiB)", "ulimit -l 4097"}, nil},
		{"unlimited", rlimit{cur: rlimInfinity, max: rlimInfinity, known: true},
			[]string{"unlimited locked-memory limit", "ulimit -l"}, []string{"ulimit -l 4097"}},
		{"unknown", rlimit{},
			[]string{"RLIMIT_MEMLOCK", "at least 4194404 bytes (4096 KiB)"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error = &memlockError{size: 4 << 20, registered: 100, limit: tc.limit, err: cause}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("no %q in %q", w, msg)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(msg, n) {
					t.Errorf("%q in %q", n, msg)
				}
			}
			if !errors.Is(err, ErrNoMemory) || !errors.Is(err, syscall.ENOMEM) || !errors.Is(err, verbs.ErrNoMemory) {
				t.Errorf("%v does not match ErrNoMemory, verbs.ErrNoMemory and ENOMEM", err)
			}
		})
	}
}

package runtime

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/internal/rlimit"
	"github.com/verbsrt/verbsrt/verbs"
)

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
		limit     rlimit.Limit
		want, not []string
	}{
		{"soft below, hard above", rlimit.Limit{Cur: 64 << 10, Max: rlimit.Infinity, Known: true},
			[]string{"RLIMIT_MEMLOCK) is 65536 bytes (64 KiB)", "needed 4194404 bytes (4096 KiB)", "ulimit -l 4097", "WithMemoryLimit"},
			[]string{"takes privilege"}},
		{"both below", rlimit.Limit{Cur: 64 << 10, Max: 64 << 10, Known: true},
			[]string{"hard limit is 65536 bytes (64 KiB) too", "takes privilege", "CAP_IPC_LOCK", "ulimit -l 4097"},
			nil},
		{"hard limit exactly the need", rlimit.Limit{Cur: 64 << 10, Max: 4194404, Known: true},
			[]string{"ulimit -l 4097"}, []string{"takes privilege"}},
		{"soft limit above the arena's need", rlimit.Limit{Cur: 8 << 20, Max: 8 << 20, Known: true},
			[]string{"of 8388608 bytes (8192 KiB), above the 4194404 bytes (4096 KiB)", "registered itself", "ulimit -l unlimited"},
			[]string{"ulimit -l 4097", "WithMemoryLimit"}},
		{"soft limit one byte below the need", rlimit.Limit{Cur: 4194403, Max: rlimit.Infinity, Known: true},
			[]string{"is 4194403 bytes (4096 KiB) and the runtime needed 4194404 bytes (4096 KiB)", "ulimit -l 4097"}, nil},
		{"unlimited", rlimit.Limit{Cur: rlimit.Infinity, Max: rlimit.Infinity, Known: true},
			[]string{"unlimited locked-memory limit", "ulimit -l"}, []string{"ulimit -l 4097"}},
		{"unknown", rlimit.Limit{},
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

package rlimit

import (
	"strings"
	"testing"
)

// TestParse reads limits from /proc/PID/limits' format: numbers,
// "unlimited", and nothing known from a file without the line.
func TestParse(t *testing.T) {
	const limits = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max open files            1024                 1048576              files     
Max locked memory         65536                8388608              bytes     
Max address space         unlimited            unlimited            bytes     
`
	for _, tc := range []struct {
		file, name string
		want       Limit
	}{
		{limits, Memlock, Limit{Cur: 65536, Max: 8388608, Known: true}},
		{limits, Nofile, Limit{Cur: 1024, Max: 1048576, Known: true}},
		{limits, "Max address space", Limit{Cur: Infinity, Max: Infinity, Known: true}},
		{strings.ReplaceAll(limits, "65536 ", "unlimited "), Memlock, Limit{Cur: Infinity, Max: 8388608, Known: true}},
		{strings.ReplaceAll(limits, "65536 ", "lots "), Memlock, Limit{Max: 8388608}},
		{"Limit Soft Limit Hard Limit Units\n", Memlock, Limit{}},
	} {
		if got := Parse(strings.NewReader(tc.file), tc.name); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if l := Read(Memlock); !l.Known {
		t.Errorf("this process's RLIMIT_MEMLOCK is not known: %+v", l)
	}
}

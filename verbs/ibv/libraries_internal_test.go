package ibv

import (
	"bufio"
	"strings"
	"testing"
)

// TestMappedPath finds the file a soname resolved to in /proc/self/maps'
// format: the first mapping whose base name starts with the library's
// name, a path with spaces whole, and nothing for anonymous mappings or a
// library that is not there.
func TestMappedPath(t *testing.T) {
	const maps = `55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 131 /usr/bin/verbsrt
7f1c2a000000-7f1c2a021000 rw-p 00000000 00:00 0 
7f1c2b400000-7f1c2b40e000 r--p 00000000 08:01 4242 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0
7f1c2b40e000-7f1c2b41f000 r-xp 0000e000 08:01 4242 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0
7f1c2b600000-7f1c2b610000 r--p 00000000 08:01 77 /opt/rdma core/lib/librdmacm.so.1.3.44.0
7ffd1e9e0000-7ffd1ea01000 rw-p 00000000 00:00 0                          [stack]
`
	for _, tc := range []struct{ prefix, want string }{
		{"libibverbs.so", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"},
		{"librdmacm.so", "/opt/rdma core/lib/librdmacm.so.1.3.44.0"},
		{"libmlx5.so", ""},
	} {
		if got := mappedPath(bufio.NewScanner(strings.NewReader(maps)), tc.prefix); got != tc.want {
			t.Errorf("mappedPath(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

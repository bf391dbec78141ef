package direct

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/internal/perftest"
)

// TestAtomicCheck: an atomic client accepts fetched values that rise by
// one per fetch of each line from any start, and refuses a line whose
// value skipped or repeated (a lost or doubled fetch-and-add).
func TestAtomicCheck(t *testing.T) {
	const depth, slots = 4, 2
	run := func(values []uint64) error {
		e := &end{cfg: Config{Test: "atomic", TxDepth: depth}, local: make([]byte, depth*8)}
		c := newAtomicCheck(e, slots)
		for seq, v := range values {
			binary.LittleEndian.PutUint64(e.local[(seq%depth)*8:], v)
			if err := c.done(uint64(seq), uint64(seq+1)); err != nil {
				return err
			}
		}
		return nil
	}
	// Lines start at 0x7f and 0x10: seq 0, 2, 4 hit line 0; 1, 3, 5 line 1.
	if err := run([]uint64{0x7f, 0x10, 0x80, 0x11, 0x81, 0x12}); err != nil {
		t.Errorf("consecutive values refused: %v", err)
	}
	for _, bad := range [][]uint64{{0x7f, 0x10, 0x80, 0x11, 0x82, 0x12}, {0x7f, 0x10, 0x80, 0x10}} {
		if err := run(bad); err == nil {
			t.Errorf("%#x accepted", bad)
		}
	}
}

// TestPeerPattern: with PeerPattern (-peer-pattern) a peer that is not verbsrt (a
// perftest program under ptcheck.so) has its bytes checked as a verbsrt
// peer's: the WRITEs a server finds and the bytes a client READ must be
// the pattern slot by slot, and one wrong byte fails the run. Without
// it, such a peer's random bytes are not checked.
func TestPeerPattern(t *testing.T) {
	const size, cycle, line = 64, 4096, 64
	patterned := func() []byte {
		b := make([]byte, cycle)
		for i := range b {
			b[i] = directPattern(i)
		}
		return b
	}
	for _, test := range []string{"write", "read"} {
		for _, vouched := range []bool{true, false} {
			var out bytes.Buffer
			e := &end{cfg: Config{Test: test, Size: size, PeerPattern: vouched}, out: &out,
				hello: perftest.Hello{CycleBuffer: cycle, CacheLine: line}, local: patterned(), remote: patterned()}
			check := func() error {
				if test == "write" {
					return e.checkServer(size, 1000)
				}
				return e.checkClient(1000, nil)
			}
			if err := check(); err != nil {
				t.Errorf("%s, -peer-pattern %v: the pattern refused: %v", test, vouched, err)
			}
			if got := strings.Contains(out.String(), " check: "); got != vouched {
				t.Errorf("%s, -peer-pattern %v: a check line printed %v:\n%s", test, vouched, got, out.String())
			}
			// The peer's bytes: what its WRITEs left here, or what this end READ.
			peers := map[string][]byte{"write": e.remote, "read": e.local}[test]
			peers[cycle-size+5]++
			if err := check(); (err != nil) != vouched {
				t.Errorf("%s, -peer-pattern %v: a wrong byte in the last slot gave %v", test, vouched, err)
			}
		}
	}
}

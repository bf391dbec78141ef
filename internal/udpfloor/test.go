package udpfloor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The exchanges a Test runs.
const (
	RoundTrip = "rr"     // one datagram and its echo at a time
	Stream    = "stream" // one-way messages under a window
)

// Test is one measurement.
type Test struct {
	Kind  string `json:"kind"`  // RoundTrip or Stream
	Size  int    `json:"size"`  // message bytes
	Batch int    `json:"batch"` // datagrams a system call (stream); 1 for rr
	Count int    `json:"count"` // messages (stream) or round trips (rr)
}

func (t Test) String() string { return fmt.Sprintf("%s:%d:%d", t.Kind, t.Size, t.Batch) }

// The defaults of Config's fields.
const (
	DefaultChunk        = 4096 // the provider's largest path MTU
	DefaultBatch        = 64
	DefaultWindow       = 2 * DefaultBatch
	DefaultStallTimeout = 50 * time.Millisecond
	// Overhead is what a RoCE v2 WRITE ONLY packet adds to its payload in
	// the UDP datagram: a BTH (12 bytes), a RETH (16) and the ICRC (4).
	Overhead = 32
	// MaxSize bounds a Test's Size.
	MaxSize = 64 << 20
)

// DefaultTests are the tests of a run that names none: the 64-byte round
// trip, 64-byte, 4 KiB and 64 KiB streams unbatched and in batches of
// DefaultBatch, and the 4 KiB round trip.
const DefaultTests = "rr:64,stream:64:1,stream:64:64,stream:4096:1,stream:4096:64,stream:65536:1,stream:65536:64,rr:4096"

// defaultCount is how many messages a test moves without a count: about
// as many bytes for every size, and the round trips fewer, since each
// waits for the last.
func defaultCount(kind string, size int) int {
	switch {
	case kind == RoundTrip:
		return 10000
	case size <= 1024:
		return 100000
	}
	return max(1000, (200<<20)/size)
}

// ParseTests parses a comma-separated list of tests, each KIND:SIZE or
// KIND:SIZE:BATCH (rr ignores the batch), with count messages each (0:
// a default by kind and size).
func ParseTests(s string, count int) ([]Test, error) {
	var ts []Test
	for _, f := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(f), ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("test %q: want KIND:SIZE or KIND:SIZE:BATCH", f)
		}
		t := Test{Kind: parts[0], Batch: 1, Count: count}
		var err error
		if t.Size, err = strconv.Atoi(parts[1]); err != nil {
			return nil, fmt.Errorf("test %q: size: %w", f, err)
		}
		if len(parts) == 3 {
			if t.Batch, err = strconv.Atoi(parts[2]); err != nil {
				return nil, fmt.Errorf("test %q: batch: %w", f, err)
			}
		}
		if t.Count == 0 {
			t.Count = defaultCount(t.Kind, t.Size)
		}
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("test %q: %w", f, err)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// check reports what is wrong with t, if anything.
func (t Test) check() error {
	switch {
	case t.Kind != RoundTrip && t.Kind != Stream:
		return fmt.Errorf("kind %q: want %s or %s", t.Kind, RoundTrip, Stream)
	case t.Size < 8 || t.Size > MaxSize:
		return fmt.Errorf("size %d: 8 bytes (a datagram's number) to %d", t.Size, MaxSize)
	case t.Kind == RoundTrip && t.Size > DefaultChunk:
		return fmt.Errorf("size %d: a round trip is one datagram, at most %d bytes", t.Size, DefaultChunk)
	case t.Batch < 1 || t.Batch > 1024:
		return errors.New("batch: 1 to 1024 datagrams")
	case t.Count < 1:
		return errors.New("count: at least 1")
	}
	return nil
}

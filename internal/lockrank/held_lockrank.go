//go:build lockrank

package lockrank

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// The record of who holds what: a table of the goroutines that hold
// ranked locks, each with its locks in the order it took them. Goroutines
// that hold none have no entry. Every access runs under table.mu with the
// race detector's synchronization events off (raceDisable) and in
// functions it does not instrument (go:norace), so the table neither
// orders the goroutines that use it nor shows as a race of its own.
const (
	// maxHeld bounds the ranked locks one goroutine holds at once: more
	// than there are ranks, since TryLock may take a lock twice over.
	maxHeld = 32
	// maxHolders bounds the goroutines that hold ranked locks at once.
	maxHolders = 1 << 12
)

// A held is one ranked lock a goroutine holds.
type held struct {
	m    unsafe.Pointer // the Mutex
	c    class
	rank Rank
}

// A holder is a goroutine's entry: the locks it holds, in the order it
// took them (Unlock may remove any of them).
type holder struct {
	g    uint64 // the goroutine's id, 0 for a free entry
	n    int
	held [maxHeld]held
}

// table is an open-addressing hash table of holders, keyed by goroutine
// id, with linear probing and backward-shift deletion.
var table struct {
	mu sync.Mutex
	h  [maxHolders]holder
}

// home is where g's probe sequence starts.
func home(g uint64) int { return int((g * 0x9e3779b97f4a7c15) >> (64 - 12)) }

// take checks that goroutine g may Lock m of class c now: nil, or the
// error that names the lock and every lock g holds of c's rank or above.
func take(g uint64, m unsafe.Pointer, c class) error {
	raceDisable()
	table.mu.Lock()
	var bad []held
	n := heldAbove(g, c.rank(), &bad)
	table.mu.Unlock()
	raceEnable()
	if n == 0 {
		return nil
	}
	return &orderError{g: g, taking: held{m: m, c: c, rank: c.rank()}, above: bad}
}

// took records that goroutine g holds m of class c.
func took(g uint64, m unsafe.Pointer, c class) {
	raceDisable()
	table.mu.Lock()
	full := record(g, held{m: m, c: c, rank: c.rank()})
	table.mu.Unlock()
	raceEnable()
	if full != "" {
		panic("lockrank: " + full)
	}
}

// released forgets m: held by g, or by another goroutine when one locked
// it and g unlocks it.
func released(g uint64, m unsafe.Pointer) {
	raceDisable()
	table.mu.Lock()
	forget(g, m)
	table.mu.Unlock()
	raceEnable()
}

// find returns the index of g's entry, or -1 and the free entry where it
// would go.
//
//go:norace
func find(g uint64) (at, free int) {
	for i, k := home(g), 0; k < maxHolders; i, k = (i+1)&(maxHolders-1), k+1 {
		switch table.h[i].g {
		case g:
			return i, -1
		case 0:
			return -1, i
		}
	}
	return -1, -1
}

// heldAbove appends to bad what g holds of rank r or above, and returns
// how many it found.
//
//go:norace
func heldAbove(g uint64, r Rank, bad *[]held) int {
	at, _ := find(g)
	if at < 0 {
		return 0
	}
	h := &table.h[at]
	n := 0
	for i := range h.n {
		if h.held[i].rank >= r {
			*bad = append(*bad, h.held[i])
			n++
		}
	}
	return n
}

// record adds x to g's locks; it returns why it could not, or "".
//
//go:norace
func record(g uint64, x held) string {
	at, free := find(g)
	if at < 0 {
		if free < 0 {
			return fmt.Sprintf("more than %d goroutines hold ranked locks", maxHolders)
		}
		at = free
		table.h[at].g = g
	}
	h := &table.h[at]
	if h.n == maxHeld {
		return fmt.Sprintf("goroutine %d holds more than %d ranked locks", g, maxHeld)
	}
	h.held[h.n] = x
	h.n++
	return ""
}

// forget removes m from g's locks, or from whichever goroutine's it is in,
// and frees an entry left empty.
//
//go:norace
func forget(g uint64, m unsafe.Pointer) {
	if at, _ := find(g); at >= 0 && drop(at, m) {
		return
	}
	for i := range table.h {
		if table.h[i].g != 0 && drop(i, m) {
			return
		}
	}
}

// drop removes m from entry at, keeping the order of the others; false if
// the entry does not hold m.
//
//go:norace
func drop(at int, m unsafe.Pointer) bool {
	h := &table.h[at]
	for i := h.n - 1; i >= 0; i-- {
		if h.held[i].m != m {
			continue
		}
		copy(h.held[i:h.n-1], h.held[i+1:h.n])
		h.n--
		h.held[h.n] = held{}
		if h.n == 0 {
			remove(at)
		}
		return true
	}
	return false
}

// remove frees entry i, moving back the entries after it whose probe
// sequence passes through i, so that find still finds them.
//
//go:norace
func remove(i int) {
	for j := i; ; {
		j = (j + 1) & (maxHolders - 1)
		if table.h[j].g == 0 {
			break
		}
		k := home(table.h[j].g)
		if i <= j && i < k && k <= j || i > j && (i < k || k <= j) {
			continue // j's entry sits at or after its home: it stays
		}
		table.h[i] = table.h[j]
		i = j
	}
	table.h[i] = holder{}
}

// orderError is the panic value of a Lock that breaks the order.
type orderError struct {
	g      uint64
	taking held
	above  []held // what the goroutine holds of taking's rank or above
}

func (e *orderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lockrank: goroutine %d locks %s while it holds ", e.g, describe(e.taking))
	for i, h := range e.above {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(describe(h))
	}
	b.WriteString("; a lock may be taken only above every lock held (internal/lockrank/rank.go)")
	return b.String()
}

func describe(h held) string {
	return fmt.Sprintf("%s (rank %d, %p)", strings.TrimPrefix(fmt.Sprintf("%T", h.c), "lockrank."), h.rank, h.m)
}

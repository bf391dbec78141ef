//go:build lockrank

package lockrank

import (
	"sync"
	"unsafe"
)

// Mutex is a mutual exclusion lock of rank C (rank.go). The zero value is
// an unlocked mutex; a Mutex must not be copied after first use. With the
// lockrank build tag, Lock panics instead of breaking the order, and the
// record of who holds what follows every Lock, TryLock and Unlock.
type Mutex[C class] struct{ mu sync.Mutex }

// Lock locks m, as sync.Mutex.Lock. It panics, before it waits, when the
// goroutine holds a lock of m's rank or above.
func (m *Mutex[C]) Lock() {
	var c C
	g := goid()
	if bad := take(g, unsafe.Pointer(m), c); bad != nil {
		panic(bad)
	}
	m.mu.Lock()
	took(g, unsafe.Pointer(m), c)
}

// TryLock tries to lock m, as sync.Mutex.TryLock. It never waits, so it
// checks no order; a lock it took counts as held.
func (m *Mutex[C]) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	var c C
	took(goid(), unsafe.Pointer(m), c)
	return true
}

// Unlock unlocks m, as sync.Mutex.Unlock. Like sync.Mutex, m may be
// unlocked by a goroutine other than the one that locked it.
func (m *Mutex[C]) Unlock() {
	released(goid(), unsafe.Pointer(m))
	m.mu.Unlock()
}

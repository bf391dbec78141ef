//go:build !lockrank

package lockrank

import "sync"

// Mutex is a mutual exclusion lock of rank C (rank.go). The zero value is
// an unlocked mutex; a Mutex must not be copied after first use. Without
// the lockrank build tag it is a sync.Mutex: the methods inline to
// sync.Mutex's and check nothing.
type Mutex[C class] struct{ mu sync.Mutex }

// Lock locks m, as sync.Mutex.Lock.
func (m *Mutex[C]) Lock() { m.mu.Lock() }

// TryLock tries to lock m, as sync.Mutex.TryLock.
func (m *Mutex[C]) TryLock() bool { return m.mu.TryLock() }

// Unlock unlocks m, as sync.Mutex.Unlock.
func (m *Mutex[C]) Unlock() { m.mu.Unlock() }

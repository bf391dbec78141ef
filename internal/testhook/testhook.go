// Package testhook holds the settings that the tests of one package change
// in another package it imports, where an export_test.go cannot reach:
// the runtime's listener, seen from the tests of rdmanet. Each is
// process-wide state, read when the object it sets is made; a test that
// sets one restores it (Set's restore) and runs alone meanwhile (no
// t.Parallel). Programs never set them.
package testhook

import (
	"sync/atomic"
	"time"
)

// listenHandshakeTimeout replaces, when positive, how long a listener made
// now waits for a client's hello and for the rest of its handshake.
var listenHandshakeTimeout atomic.Int64

// ListenHandshakeTimeout returns the handshake timeout of a listener made
// now: d, its own, unless a test set another.
func ListenHandshakeTimeout(d time.Duration) time.Duration {
	if set := time.Duration(listenHandshakeTimeout.Load()); set > 0 {
		return set
	}
	return d
}

// SetListenHandshakeTimeout makes the listeners made from now on wait d
// for a client's hello (a test that must tell a listener stalled by a
// silent client from a slow machine sets it beyond the test's own end).
// restore puts back what was set before.
func SetListenHandshakeTimeout(d time.Duration) (restore func()) {
	old := listenHandshakeTimeout.Swap(int64(d))
	return func() { listenHandshakeTimeout.Store(old) }
}

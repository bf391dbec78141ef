package runtime

import (
	"sync"

	"github.com/verbsrt/verbsrt/verbs/soft"
)

// defaultSoft is the soft fabric that the runtimes made without
// WithProvider share, so that they reach each other as the docs say
// (runtimes of one process, through Listen and Dial). Each soft.Provider is
// a fabric of its own, with the same GIDs and QP numbers as any other
// (soft0 is 10.77.0.1 and its first QP 0x11 on every one): a runtime
// dialing one on another provider would connect its QP to the address of
// a QP of its own fabric, its own when both made as many QPs, which the
// handshake refuses (notSelf, hello.go). It lives while some runtime uses
// it.
var defaultSoft struct {
	mu    sync.Mutex
	p     *soft.Provider
	users int
}

func acquireDefaultSoft() *soft.Provider {
	defaultSoft.mu.Lock()
	defer defaultSoft.mu.Unlock()
	if defaultSoft.users == 0 {
		defaultSoft.p = soft.New(soft.Config{})
	}
	defaultSoft.users++
	return defaultSoft.p
}

func releaseDefaultSoft() {
	defaultSoft.mu.Lock()
	defer defaultSoft.mu.Unlock()
	if defaultSoft.users--; defaultSoft.users == 0 {
		defaultSoft.p.Close()
		defaultSoft.p = nil
	}
}

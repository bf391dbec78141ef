package runtime

import (
	"errors"
	"sync"
)

// ErrKeyRevoked matches the error of a peer's access to memory whose owner
// closed the exposure (Exposure.Close, or Buffer.Free): the owner's device
// refused the key (REM_ACCESS_ERR, which ends the connection by RC's rule),
// and the owner told why. ErrLeaseExpired takes its place for a key whose
// lease ran out.
var ErrKeyRevoked = errors.New("verbsrt: the peer revoked the key of the memory accessed")

// Why a peer's access failed, as the owner of the memory tells it on the
// link beside the QP (peerlink.go) when the peer names the key its access
// failed on: the name on the wire, and the error the peer's endpoint then
// matches.
var keyCauses = []struct {
	name string
	err  error
}{
	{"lease_expired", ErrLeaseExpired},
	{"revoked", ErrKeyRevoked},
}

// keyCauseErr returns the error of the cause named name, nil for a name
// this side does not know.
func keyCauseErr(name string) error {
	for _, c := range keyCauses {
		if c.name == name {
			return c.err
		}
	}
	return nil
}

// keyCauseName returns the wire name of err, a cause of keyCauses.
func keyCauseName(err error) string {
	for _, c := range keyCauses {
		if c.err == err {
			return c.name
		}
	}
	return ""
}

// maxRevokedKeys bounds the keys a runtime remembers having revoked: the
// most recent ones, as a peer's access to a key fails soon after the
// revocation (its next READ or WRITE with the reference it holds).
const maxRevokedKeys = 4096

// revokedKeys remembers why the most recent keys of a protection domain
// were revoked, to tell a peer whose access one of them refused.
type revokedKeys struct {
	mu    sync.Mutex
	why   map[uint32]error // ErrLeaseExpired or ErrKeyRevoked; guarded by mu
	order []uint32         // the keys of why, oldest first; guarded by mu
}

// revoked records that key was revoked, and why.
func (r *revokedKeys) revoked(key uint32, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.why == nil {
		r.why = make(map[uint32]error)
	}
	if _, ok := r.why[key]; !ok {
		if len(r.order) == maxRevokedKeys {
			delete(r.why, r.order[0])
			r.order = append(r.order[:0], r.order[1:]...)
		}
		r.order = append(r.order, key)
	}
	r.why[key] = why
}

// reused forgets key: the device gave it to a new exposure, and an access
// it refuses is no longer one to a revoked key.
func (r *revokedKeys) reused(key uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.why[key]; !ok {
		return
	}
	delete(r.why, key)
	r.order = deleteKey(r.order, key)
}

func deleteKey(keys []uint32, key uint32) []uint32 {
	for i, k := range keys {
		if k == key {
			return append(keys[:i], keys[i+1:]...)
		}
	}
	return keys
}

// cause returns why key was revoked, nil when it was not (or too long ago).
func (r *revokedKeys) cause(key uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.why[key]
}

package runtime

import (
	"strings"
	"testing"
)

// TestLastWordsHeard: the link's last words are read as written, and a
// line out of form, of another kind or naming a cause this side does not
// know is skipped.
func TestLastWordsHeard(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  lastWords
	}{
		{[]string{"rkey 0x1f"}, lastWords{rkey: 0x1f, hasKey: true}},
		{[]string{"rkey 0"}, lastWords{hasKey: true}},
		{[]string{"cause lease_expired"}, lastWords{cause: "lease_expired"}},
		{[]string{"cause revoked", "rkey 0xffffffff"}, lastWords{rkey: 0xffffffff, hasKey: true, cause: "revoked"}},
		{[]string{"rkey 0x100000000", "rkey x", "rkey ", "cause", "cause made_up", "bye", "something else"}, lastWords{}},
	} {
		var w lastWords
		for _, l := range c.lines {
			w.hear(l)
		}
		if w != c.want {
			t.Errorf("%q heard as %+v, want %+v", c.lines, w, c.want)
		}
	}
	w := lastWords{rkey: 0x2a, hasKey: true, cause: "revoked"}
	var heard lastWords
	for l := range strings.Lines(w.lines()) {
		heard.hear(strings.TrimSuffix(l, "\n"))
	}
	if heard != w {
		t.Errorf("%+v written as %q, heard as %+v", w, w.lines(), heard)
	}
}

// TestRevokedKeysBounded: the record of revoked keys keeps the most
// recent maxRevokedKeys, and forgets a key the device gave out again.
func TestRevokedKeysBounded(t *testing.T) {
	var r revokedKeys
	for k := range uint32(maxRevokedKeys + 10) {
		r.revoked(k, ErrKeyRevoked)
	}
	if len(r.why) != maxRevokedKeys || len(r.order) != maxRevokedKeys {
		t.Fatalf("%d keys remembered (%d in order), want %d", len(r.why), len(r.order), maxRevokedKeys)
	}
	if r.cause(9) != nil || r.cause(10) != ErrKeyRevoked || r.cause(maxRevokedKeys+9) != ErrKeyRevoked {
		t.Error("not the most recent keys remembered")
	}
	r.revoked(10, ErrLeaseExpired)
	if r.cause(10) != ErrLeaseExpired || len(r.order) != maxRevokedKeys {
		t.Errorf("a key revoked again: %v, %d in order", r.cause(10), len(r.order))
	}
	r.reused(10)
	if r.cause(10) != nil || len(r.order) != maxRevokedKeys-1 {
		t.Errorf("a key given out again: %v, %d in order", r.cause(10), len(r.order))
	}
}

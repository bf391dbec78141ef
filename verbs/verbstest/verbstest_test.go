package verbstest

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// These tests check the suite's own logic; they need no provider.

func gidOf(s string) verbs.GID { return verbs.GIDFromAddr(netip.MustParseAddr(s)) }

func TestPickGID(t *testing.T) {
	errEmpty := errors.New("empty entry")
	table := func(entries ...string) func(int) (verbs.GID, error) {
		return func(i int) (verbs.GID, error) {
			if i >= len(entries) || entries[i] == "" {
				return verbs.GID{}, errEmpty
			}
			return gidOf(entries[i]), nil
		}
	}
	for _, c := range []struct {
		name    string
		want    int
		entries []string
		index   int
		gid     string
		err     bool
	}{
		{"rxe: link-local then IPv4", -1, []string{"fe80::1", "::ffff:198.18.0.1"}, 1, "::ffff:198.18.0.1", false},
		{"unreadable entries skipped", -1, []string{"fe80::1", "", "::ffff:10.0.0.2"}, 2, "::ffff:10.0.0.2", false},
		{"0.0.0.0 is not an address", -1, []string{"fe80::1", "::ffff:0.0.0.0", "::ffff:10.0.0.3"}, 2, "::ffff:10.0.0.3", false},
		{"no IPv4: index 0", -1, []string{"fe80::1", "2001:db8::1"}, 0, "fe80::1", false},
		{"explicit index", 1, []string{"::ffff:10.0.0.1", "fe80::1"}, 1, "fe80::1", false},
		{"explicit unreadable", 3, []string{"fe80::1"}, 0, "", true},
		{"empty table", -1, nil, 0, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			i, g, err := pickGID(c.want, len(c.entries), table(c.entries...))
			if c.err {
				if err == nil || !errors.Is(err, errEmpty) {
					t.Fatalf("pickGID = %d, %v, %v; want an error wrapping the query's", i, g, err)
				}
				return
			}
			if err != nil || i != c.index || g != gidOf(c.gid) {
				t.Fatalf("pickGID = %d, %v, %v; want %d, %s", i, g, err, c.index, c.gid)
			}
		})
	}
}

// TestModifyMasks checks that the set-up helpers use exactly the masks the
// kernel requires for each transition and QP type.
func TestModifyMasks(t *testing.T) {
	p := path{mtu: verbs.MTU1024, destQPN: 0x12, rqPSN: 0x345}
	for _, typ := range []verbs.QPType{verbs.QPTypeRC, verbs.QPTypeUC, verbs.QPTypeUD, verbs.QPTypeXRCSend, verbs.QPTypeXRCRecv} {
		_, m := initAttr(typ, 1)
		if err := verbs.CheckModify(typ, verbs.QPStateReset, verbs.QPStateInit, m); err != nil {
			t.Errorf("%v RESET->INIT mask %v: %v", typ, m, err)
		}
		a, m := rtrAttr(typ, p, defaultLink, 16)
		if err := verbs.CheckModify(typ, verbs.QPStateInit, verbs.QPStateRTR, m); err != nil {
			t.Errorf("%v INIT->RTR mask %v: %v", typ, m, err)
		}
		if typ.Connected() && (a.DestQPN != p.destQPN || a.RQPSN != p.rqPSN || a.PathMTU != p.mtu) {
			t.Errorf("%v RTR attributes %v", typ, a)
		}
		_, m = rtsAttr(typ, 0x678, defaultLink, 16)
		if err := verbs.CheckModify(typ, verbs.QPStateRTR, verbs.QPStateRTS, m); err != nil {
			t.Errorf("%v RTR->RTS mask %v: %v", typ, m, err)
		}
	}
	// The cases that drop or add a bit rely on CheckModify refusing them.
	_, m := rtrAttr(verbs.QPTypeRC, p, defaultLink, 16)
	if err := verbs.CheckModify(verbs.QPTypeRC, verbs.QPStateInit, verbs.QPStateRTR, m&^verbs.QPAttrDestQPN); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("RC INIT->RTR without DEST_QPN: %v", err)
	}
	if err := verbs.CheckModify(verbs.QPTypeRC, verbs.QPStateReset, verbs.QPStateRTS, m); !errors.Is(err, verbs.ErrQPState) {
		t.Errorf("RC RESET->RTS: %v", err)
	}
}

func TestCaseNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range allCases {
		g, n, ok := strings.Cut(c.name, "/")
		if !ok || g == "" || n == "" || strings.Contains(n, "/") || c.fn == nil {
			t.Errorf("case %q: want Group/Name and a function", c.name)
		}
		if seen[c.name] {
			t.Errorf("case %q listed twice", c.name)
		}
		seen[c.name] = true
	}
	n := 0
	groupSeen := map[string]bool{}
	for _, g := range groups() {
		if groupSeen[g.name] {
			t.Errorf("group %q is split: keep its cases together in allCases", g.name)
		}
		groupSeen[g.name] = true
		n += len(g.cases)
	}
	if n != len(allCases) || n < 40 {
		t.Errorf("%d cases in groups, %d listed; want the same and at least 40", n, len(allCases))
	}
}

func TestPattern(t *testing.T) {
	a, b := pattern(4096, 1), pattern(4096, 2)
	same := 0
	for i := range a {
		if a[i] == fillByte || b[i] == fillByte {
			t.Fatalf("pattern holds the fill byte at %d", i)
		}
		if a[i] == b[i] {
			same++
		}
	}
	if same > 64 {
		t.Errorf("patterns of seeds 1 and 2 agree at %d of 4096 bytes", same)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{GIDIndex: -1}.withDefaults()
	if c.Port != 1 || c.Timeout != 10*time.Second || c.GIDIndex != -1 {
		t.Errorf("defaults: %+v", c)
	}
	c = Config{Port: 2, GIDIndex: 3, Timeout: time.Minute}.withDefaults()
	if c.Port != 2 || c.Timeout != time.Minute || c.GIDIndex != 3 {
		t.Errorf("explicit settings changed: %+v", c)
	}
}

package verbs_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// plainCtx is a Context without the GIDTabler extension: a table of
// three slots, the middle one empty. Methods it does not override panic.
type plainCtx struct {
	verbs.Context
	gids []verbs.GID
}

func (c plainCtx) QueryPort(uint8) (verbs.PortAttr, error) {
	return verbs.PortAttr{GIDTblLen: len(c.gids)}, nil
}

func (c plainCtx) QueryGID(_ uint8, i int) (verbs.GID, error) { return c.gids[i], nil }

// tablerCtx has the extension, which fails with err.
type tablerCtx struct {
	plainCtx
	err error
}

func (c tablerCtx) QueryGIDTable(uint8) ([]verbs.GIDEntry, error) {
	return []verbs.GIDEntry{{Index: 2, GID: c.gids[2], Type: verbs.GIDTypeRoCEv2, Netdev: "eth1"}}, c.err
}

// TestQueryGIDTableFallback checks QueryGIDTable with the extension, with
// an extension that cannot read the attributes here (ErrNotSupported),
// and without it: the fallback lists the non-empty GIDs, untyped.
func TestQueryGIDTableFallback(t *testing.T) {
	g := verbs.GIDFromAddr(netip.MustParseAddr("10.0.0.1"))
	ll := verbs.GIDFromAddr(netip.MustParseAddr("fe80::1"))
	plain := plainCtx{gids: []verbs.GID{ll, {}, g}}
	untyped := []verbs.GIDEntry{{Index: 0, GID: ll}, {Index: 2, GID: g}}
	typed := []verbs.GIDEntry{{Index: 2, GID: g, Type: verbs.GIDTypeRoCEv2, Netdev: "eth1"}}
	for _, tc := range []struct {
		name      string
		c         verbs.Context
		want      []verbs.GIDEntry
		wantTyped bool
	}{
		{"extension", tablerCtx{plainCtx: plain}, typed, true},
		{"extension without sysfs", tablerCtx{plainCtx: plain, err: verbs.NewError("ibv_query_gid_table", verbs.ErrNotSupported, "")}, untyped, false},
		{"no extension", plain, untyped, false},
	} {
		got, isTyped, err := verbs.QueryGIDTable(tc.c, 1)
		if err != nil || isTyped != tc.wantTyped || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, typed %v, %v; want %v, typed %v", tc.name, got, isTyped, err, tc.want, tc.wantTyped)
		}
	}
}

func TestGIDTypeString(t *testing.T) {
	for typ, want := range map[verbs.GIDType]string{verbs.GIDTypeIB: "IB", verbs.GIDTypeRoCEv1: "RoCE v1",
		verbs.GIDTypeRoCEv2: "RoCE v2", 7: "GIDType(7)"} {
		if got := typ.String(); got != want {
			t.Errorf("%d: %q, want %q", typ, got, want)
		}
	}
	e := verbs.GIDEntry{Index: 3, GID: verbs.GIDFromAddr(netip.MustParseAddr("10.0.0.1")), Type: verbs.GIDTypeRoCEv2}
	if got := e.String(); got != "3 ::ffff:10.0.0.1 RoCE v2 -" {
		t.Errorf("entry: %q", got)
	}
	if a := e.Addr(); a != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("Addr: %v", a)
	}
}

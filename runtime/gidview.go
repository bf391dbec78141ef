package runtime

import (
	"fmt"
	"net/netip"

	"github.com/verbsrt/verbsrt/verbs"
)

// gidView decides how a GID of the runtime's provider reads wherever the
// runtime shows one: the ends of an endpoint (Addr, and so OpError and
// rdmanet's net.OpErrors), the GID tables in New's errors about the
// device it could not pick, Stats.GID and the start-up log line. The soft
// provider makes up the GIDs of a device whose model does not give them,
// to look like a RoCE device's table (10.77.0.x, IPv4-mapped, beside a
// link-local one): they name nothing a reader could look for on a
// network, so they are not shown at all. Every other GID reads as its IP
// address.
type gidView struct {
	inventor gidInventor // nil: the provider invents none
}

// gidInventor is the extension of a provider that makes GIDs up (soft's
// MadeUpGID), found by type assertion.
type gidInventor interface {
	MadeUpGID(g verbs.GID) bool
}

// gidViewOf returns how the GIDs of provider p read.
func gidViewOf(p verbs.Provider) gidView {
	inv, _ := p.(gidInventor)
	return gidView{inventor: inv}
}

// invented reports whether g is made up.
func (v gidView) invented(g verbs.GID) bool { return v.inventor != nil && v.inventor.MadeUpGID(g) }

// inventedGID stands for a made-up GID in a GID table shown.
const inventedGID = "(made up)"

// addr returns g as an IP address (IPv4 for RoCE's IPv4-mapped GIDs), ""
// for a made-up one.
func (v gidView) addr(g verbs.GID) string {
	if v.invented(g) {
		return ""
	}
	return netip.AddrFrom16(g).Unmap().String()
}

// entry returns a GID table's entry as show_gids lists it (index, GID,
// type, netdev; index and GID alone when the table is not typed), the GID
// as inventedGID when it is made up.
func (v gidView) entry(e verbs.GIDEntry, typed bool) string {
	if !v.invented(e.GID) {
		if typed {
			return e.String()
		}
		return fmt.Sprintf("%d %s", e.Index, e.GID)
	}
	if typed {
		nd := e.Netdev
		if nd == "" {
			nd = "-"
		}
		return fmt.Sprintf("%d %s %s %s", e.Index, inventedGID, e.Type, nd)
	}
	return fmt.Sprintf("%d %s", e.Index, inventedGID)
}

// stat returns g as Stats reports it: the zero GID for a made-up one.
func (v gidView) stat(g verbs.GID) verbs.GID {
	if v.invented(g) {
		return verbs.GID{}
	}
	return g
}

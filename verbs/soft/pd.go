package soft

import (
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/internal/swhca"
)

// pdHooks ties a PD to the device's key table and checks. The soft
// device reaches MRs through their slices, so it could work with any
// memory; RegMR refuses Go memory all the same (verbs.CheckRegistrable),
// as the ibv provider does, so that what runs here runs on a device.
func pdHooks(c *context) swhca.PDHooks {
	d := c.dev
	return swhca.PDHooks{
		CreateQP:  c.createQP,
		CreateSRQ: c.createSRQ,
		Keys:      mrKeys{d},
		CheckAV:   func(a *verbs.AHAttr) error { return checkAV(d, a) },
		Deregistered: func(removed bool) {
			if removed {
				d.p.quiesce()
			}
		},
	}
}

// mrKeys is the device's key table: keys counted up (newKey), found by
// the engine with one atomic load (cowMap).
type mrKeys struct{ d *device }

func (k mrKeys) Reserve() uint32 { return k.d.newKey() }

func (k mrKeys) Publish(key uint32, m *swhca.MR) { k.d.mrs.put(key, m) }

func (k mrKeys) Delete(key uint32) { k.d.mrs.del(key) }

// avPort is the port an address vector leaves from: port 1 when it names
// none.
func avPort(a *verbs.AHAttr) uint8 { return max(a.PortNum, 1) }

// checkAV validates an address vector the way a device does: on a RoCE
// port it needs a GRH (RoCE has no LIDs), on an InfiniBand port the GRH is
// optional (without one the DLID alone routes, within the subnet); a GRH's
// source GID index must exist on the port.
func checkAV(d *device, a *verbs.AHAttr) error {
	pt := d.portN(avPort(a))
	if pt == nil {
		return swhca.AttrError("port_num")
	}
	if !a.IsGlobal {
		if pt.linkLayer != verbs.LinkLayerInfiniBand {
			return swhca.AttrError("RoCE address vectors need a GRH (is_global)")
		}
		return nil
	}
	if int(a.GRH.SGIDIndex) >= len(pt.gids) {
		return swhca.AttrError("sgid_index out of the GID table")
	}
	return nil
}

package soft

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/verbs"
)

func atomicAdd(p *uint64, d uint64) uint64      { return atomic.AddUint64(p, d) }
func atomicLoad(p *uint64) uint64               { return atomic.LoadUint64(p) }
func atomicCAS(p *uint64, old, new uint64) bool { return atomic.CompareAndSwapUint64(p, old, new) }
func putUint64(b []byte, v uint64)              { binary.LittleEndian.PutUint64(b, v) }

// RoCEv2 header sizes after the IP header, for the IPv4 total length.
const (
	udpHeaderLen  = 8
	bthLen        = 12
	dethLen       = 8
	icrcLen       = 4
	ipv4HeaderLen = 20
)

// writeGRH fills the 40 bytes a UD receive buffer starts with. Between
// IPv4-mapped GIDs it is what rxe writes for RoCEv2 (SEMANTICS 13a): 20 zero
// bytes, then the IPv4 header. Otherwise it is an IB GRH (IPv6 layout).
func writeGRH(g *[grhLen]byte, sgid, dgid verbs.GID, hopLimit, tclass uint8, flow uint32, payload int) {
	*g = [grhLen]byte{}
	if hopLimit == 0 {
		hopLimit = defaultHopLim
	}
	src, dst := netip.AddrFrom16(sgid), netip.AddrFrom16(dgid)
	if src.Is4In6() && dst.Is4In6() {
		h := g[20:]
		total := ipv4HeaderLen + udpHeaderLen + bthLen + dethLen + payload + icrcLen
		h[0] = 0x45
		h[1] = tclass
		binary.BigEndian.PutUint16(h[2:], uint16(total))
		binary.BigEndian.PutUint16(h[6:], 0x4000) // don't fragment
		h[8] = hopLimit
		h[9] = 17 // UDP
		s4, d4 := src.Unmap().As4(), dst.Unmap().As4()
		copy(h[12:16], s4[:])
		copy(h[16:20], d4[:])
		binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h[:20]))
		return
	}
	binary.BigEndian.PutUint32(g[0:], 6<<28|uint32(tclass)<<20|flow&0xfffff)
	binary.BigEndian.PutUint16(g[4:], uint16(bthLen+dethLen+payload+icrcLen))
	g[6] = 0x1b // next header: IBA BTH
	g[7] = hopLimit
	copy(g[8:24], sgid[:])
	copy(g[24:40], dgid[:])
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

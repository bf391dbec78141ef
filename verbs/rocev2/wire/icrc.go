package wire

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// ICRCLen is the length of the invariant CRC that ends every packet.
const ICRCLen = 4

// The ICRC of a RoCE v2 packet (IBA Annex A17.3.3) is the CRC-32 of
// Ethernet (IEEE 802.3: polynomial 0x04C11DB7, initial value all ones,
// final complement, reflected) over, in order:
//
//  1. 64 bits of ones, standing for the LRH an InfiniBand packet would
//     carry; the IB ICRC masks the whole LRH (its VL and checksum change
//     hop by hop), so RoCE keeps the same 8-byte prefix.
//  2. the IP header, with the fields a router may rewrite set to ones:
//     IPv6 traffic class (8 bits), flow label (20 bits) and hop limit;
//     IPv4 type of service (DSCP and ECN), time to live and header
//     checksum. ECN marks and TTL decrements happen in flight, and a
//     checksum that covers them changes with them. Every other field is
//     covered: version, lengths, next header or protocol, addresses, and
//     on IPv4 the identification, flags and fragment offset.
//  3. the UDP header, with its checksum set to ones (a middlebox may
//     recompute or zero it); the ports and length are covered.
//  4. the BTH, with its byte 4 (FECN, BECN and six reserved bits: the
//     IB "Resv8a") set to ones, because switches set FECN/BECN in flight;
//  5. the extension headers, the payload and the pad, as sent.
//
// The CRC is transmitted least significant byte first, which is how
// Ethernet sends its FCS and how rxe stores it (rxe_icrc.c stores the
// complemented crc32_le in CPU order on little-endian hosts; its seed
// 0xdebb20e3 is the CRC register after step 1, so the two agree).

// icrcOnes is step 1.
var icrcOnes = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ipv6HeaderLen and ipv4HeaderLen are the IP header lengths the ICRC
// covers (no IPv4 options or IPv6 extension headers: RoCE v2 uses none);
// UDPHeaderLen is the UDP header's.
const (
	ipv6HeaderLen = 40
	ipv4HeaderLen = 20
	UDPHeaderLen  = 8
)

// IPHeader holds what the ICRC needs of the IP header that carried (or
// will carry) a packet. On IPv6 the addresses are all that is not masked
// besides lengths and next header, which follow from the packet. On IPv4
// the identification and flags are covered too: they must be what the
// wire carries.
type IPHeader struct {
	Src, Dst netip.Addr
	// IPv4 only: the identification field and the flags/fragment offset
	// word (0x4000 for don't-fragment).
	ID           uint16
	FlagsFragOff uint16
	// SrcPort and DstPort are the UDP ports.
	SrcPort, DstPort uint16
}

// ICRC computes the invariant CRC of udpPayload (the BTH through the pad,
// without the ICRC itself) as carried by h. It returns the CRC register
// value; PutICRC writes it in wire order.
func ICRC(h *IPHeader, udpPayload []byte) uint32 {
	if len(udpPayload) < BTHLen {
		return 0
	}
	var pseudo [ipv6HeaderLen + UDPHeaderLen + BTHLen]byte
	udpLen := UDPHeaderLen + len(udpPayload) + ICRCLen
	var n int
	if h.Src.Is4() || h.Src.Is4In6() {
		p := pseudo[:ipv4HeaderLen]
		p[0] = 0x45
		p[1] = 0xff // TOS, masked
		binary.BigEndian.PutUint16(p[2:], uint16(ipv4HeaderLen+udpLen))
		binary.BigEndian.PutUint16(p[4:], h.ID)
		binary.BigEndian.PutUint16(p[6:], h.FlagsFragOff)
		p[8] = 0xff               // TTL, masked
		p[9] = 17                 // UDP
		p[10], p[11] = 0xff, 0xff // header checksum, masked
		s, d := h.Src.Unmap().As4(), h.Dst.Unmap().As4()
		copy(p[12:], s[:])
		copy(p[16:], d[:])
		n = ipv4HeaderLen
	} else {
		p := pseudo[:ipv6HeaderLen]
		// version 6, then traffic class and flow label masked
		p[0], p[1], p[2], p[3] = 0x6f, 0xff, 0xff, 0xff
		binary.BigEndian.PutUint16(p[4:], uint16(udpLen))
		p[6] = 17   // next header: UDP
		p[7] = 0xff // hop limit, masked
		s, d := h.Src.As16(), h.Dst.As16()
		copy(p[8:], s[:])
		copy(p[24:], d[:])
		n = ipv6HeaderLen
	}
	u := pseudo[n : n+UDPHeaderLen]
	binary.BigEndian.PutUint16(u[0:], h.SrcPort)
	binary.BigEndian.PutUint16(u[2:], h.DstPort)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	u[6], u[7] = 0xff, 0xff // UDP checksum, masked
	n += UDPHeaderLen
	copy(pseudo[n:], udpPayload[:BTHLen])
	pseudo[n+4] = 0xff // FECN, BECN, reserved
	n += BTHLen

	crc := crc32.Update(0, crc32.IEEETable, icrcOnes[:])
	crc = crc32.Update(crc, crc32.IEEETable, pseudo[:n])
	return crc32.Update(crc, crc32.IEEETable, udpPayload[BTHLen:])
}

// PutICRC writes crc in the ICRC's wire order.
func PutICRC(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// GetICRC reads an ICRC in wire order.
func GetICRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

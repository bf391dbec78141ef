package rocev2

import (
	"net/netip"
	"time"
)

// FaultAction is what an injected fault does to the packets it matches.
type FaultAction int

// Fault actions, applied as a packet leaves a Transport.
const (
	// FaultDrop loses the packet.
	FaultDrop FaultAction = iota + 1
	// FaultDuplicate sends the packet twice.
	FaultDuplicate
	// FaultReorder holds the packet and sends it right after the next
	// packet the transport sends.
	FaultReorder
	// FaultDelay holds the packet until the transport's clock has moved
	// by Delay.
	FaultDelay
	// FaultCorrupt flips a bit of the packet after its ICRC is sealed,
	// so the receiver drops it for a bad ICRC.
	FaultCorrupt
	// FaultObserve sends the packet unchanged: a rule that only counts
	// and calls Hit.
	FaultObserve
)

// Fault is one rule of fault injection.
type Fault struct {
	Action FaultAction
	// Match chooses the packets, by their decoded headers; nil matches
	// every packet. It runs under the transport's lock: it must not call
	// the transport.
	Match func(*Packet) bool
	// Count is how many matching packets the fault acts on; < 1 means 1.
	Count int
	// Delay is FaultDelay's hold time.
	Delay time.Duration
	// Hit, when set, is called with each packet the fault acted on,
	// after the action (for tests that wait for it).
	Hit func(Packet)
}

type faultRule struct {
	Fault
	left int
}

type heldPacket struct {
	to netip.AddrPort
	b  []byte
}

// Inject adds a fault rule. Rules apply in the order added; the first
// with a match and count left acts on a packet.
func (t *Transport) Inject(f Fault) {
	t.mu.Lock()
	t.faults = append(t.faults, &faultRule{Fault: f, left: max(f.Count, 1)})
	t.mu.Unlock()
}

// ClearFaults removes every fault rule and releases held packets.
func (t *Transport) ClearFaults() {
	t.mu.Lock()
	t.faults = nil
	held := t.held
	t.held = nil
	t.mu.Unlock()
	for _, h := range held {
		t.write(h.to, h.b)
	}
}

// outPacket is an encoded packet on its way to the socket.
type outPacket struct {
	to netip.AddrPort
	b  []byte
}

// hitCall is a Fault.Hit to call once the packet it saw is written.
type hitCall struct {
	f func(Packet)
	p Packet
}

// transmit applies the fault rules to the encoded packet b (whose decoded
// form is p) and sends what they leave.
func (t *Transport) transmit(to netip.AddrPort, p *Packet, b []byte) error {
	var outs [3]outPacket
	var hits [1]hitCall
	out, hit := t.decide(to, p, b, outs[:0], hits[:0])
	err := t.writeMany(out)
	for _, h := range hit {
		h.f(h.p)
	}
	return err
}

// decide applies the fault rules to the encoded packet b (whose decoded
// form is p): it appends to out what is to be written now, in order
// (copies where a fault changes the bytes), holds or delays the rest,
// and appends the Hit to call once the writes are done.
func (t *Transport) decide(to netip.AddrPort, p *Packet, b []byte, out []outPacket, hits []hitCall) ([]outPacket, []hitCall) {
	t.mu.Lock()
	var rule *faultRule
	for i, r := range t.faults {
		if r.left > 0 && (r.Match == nil || r.Match(p)) {
			r.left--
			rule = r
			if r.left == 0 {
				t.faults = append(t.faults[:i:i], t.faults[i+1:]...)
			}
			break
		}
	}
	held := t.held
	t.held = nil
	if rule != nil && rule.Action == FaultReorder {
		t.held = append(t.held, heldPacket{to, append([]byte(nil), b...)})
	}
	t.mu.Unlock()

	if rule == nil {
		out = append(out, outPacket{to, b})
	} else {
		t.stats.faulted.Add(1)
		switch rule.Action {
		case FaultDrop, FaultReorder:
		case FaultObserve:
			out = append(out, outPacket{to, b})
		case FaultDuplicate:
			out = append(out, outPacket{to, b}, outPacket{to, b})
		case FaultDelay:
			c := append([]byte(nil), b...)
			t.clock.AfterFunc(rule.Delay, func() {
				if !t.closed.Load() {
					t.write(to, c)
				}
			})
		case FaultCorrupt:
			c := append([]byte(nil), b...)
			c[len(c)-ICRCLen-1] ^= 0x80
			out = append(out, outPacket{to, c})
		}
		if rule.Hit != nil {
			hits = append(hits, hitCall{rule.Hit, *p})
		}
	}
	for _, h := range held {
		out = append(out, outPacket(h))
	}
	return out, hits
}

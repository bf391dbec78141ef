package rocev2

import (
	"fmt"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"net/netip"
	"time"
)

// FaultAction is what an injected fault does to the packets it matches.
type FaultAction int

// Fault actions. Inject applies them as a packet leaves a Transport,
// InjectInbound as one arrives (see there for which it takes).
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
	Match func(*wire.Packet) bool
	// Count is how many matching packets the fault acts on; < 1 means 1.
	Count int
	// Delay is FaultDelay's hold time.
	Delay time.Duration
	// Hit, when set, is called with each packet the fault acted on,
	// after the action (for tests that wait for it).
	Hit func(wire.Packet)
}

type faultRule struct {
	Fault
	left int
}

type heldPacket struct {
	to netip.AddrPort
	b  []byte
}

// Inject adds a fault rule for the packets the transport sends. Rules
// apply in the order added; the first with a match and count left acts
// on a packet.
func (t *Transport) Inject(f Fault) {
	t.mu.Lock()
	t.faults = append(t.faults, &faultRule{Fault: f, left: max(f.Count, 1)})
	t.mu.Unlock()
}

// InjectInbound adds a fault rule for the packets the transport receives:
// it sees a packet once its ICRC checked and it decoded, before the
// Receiver of its QP does, so a responder or requester on this side meets
// the loss, or the copy, as if the wire had made it. FaultDrop loses the
// packet; FaultDuplicate hands it to the Receiver twice in a row;
// FaultCorrupt drops it and counts it in Stats.BadICRC, as a flipped bit
// would have; FaultObserve hands it on unchanged. FaultReorder and
// FaultDelay, which would hold a packet past the burst it came in, return
// ErrNotSupported. Rules apply in the order added, apart from Inject's;
// Hit runs on the goroutine that received the packet, whose Payload is
// valid only during the call.
func (t *Transport) InjectInbound(f Fault) error {
	switch f.Action {
	case FaultDrop, FaultDuplicate, FaultCorrupt, FaultObserve:
	default:
		return fmt.Errorf("%w: fault action %d on received packets", ErrNotSupported, f.Action)
	}
	t.mu.Lock()
	t.inFaults = append(t.inFaults, &faultRule{Fault: f, left: max(f.Count, 1)})
	t.mu.Unlock()
	return nil
}

// pickRule returns the first rule of *rules that matches p and has count
// left, spending one of its count (a spent rule leaves the list), or nil.
// t.mu must be held.
func pickRule(rules *[]*faultRule, p *wire.Packet) *faultRule {
	for i, r := range *rules {
		if r.left > 0 && (r.Match == nil || r.Match(p)) {
			r.left--
			if r.left == 0 {
				*rules = append((*rules)[:i:i], (*rules)[i+1:]...)
			}
			return r
		}
	}
	return nil
}

// ClearFaults removes every fault rule, sent and received packets', and
// releases held packets.
func (t *Transport) ClearFaults() {
	t.mu.Lock()
	t.faults = nil
	t.inFaults = nil
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
	f func(wire.Packet)
	p wire.Packet
}

// transmit applies the fault rules to the encoded packet b (whose decoded
// form is p) and sends what they leave.
func (t *Transport) transmit(to netip.AddrPort, p *wire.Packet, b []byte) error {
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
func (t *Transport) decide(to netip.AddrPort, p *wire.Packet, b []byte, out []outPacket, hits []hitCall) ([]outPacket, []hitCall) {
	t.mu.Lock()
	rule := pickRule(&t.faults, p)
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
			c[len(c)-wire.ICRCLen-1] ^= 0x80
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

// receiveFaulted applies the inbound fault rule (nil: none) to the
// decoded packet p and reports how many times its Receiver is to receive
// it: 0, 1 or 2. t.rxMu must be held.
func (t *Transport) receiveFaulted(rule *faultRule, p *wire.Packet) int {
	if rule == nil {
		return 1
	}
	t.stats.faulted.Add(1)
	n := 1
	switch rule.Action {
	case FaultDrop:
		n = 0
	case FaultCorrupt:
		t.stats.badICRC.Add(1)
		n = 0
	case FaultDuplicate:
		n = 2
	}
	if rule.Hit != nil {
		rule.Hit(*p)
	}
	return n
}

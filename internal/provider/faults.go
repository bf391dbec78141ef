package provider

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/verbsrt/verbsrt/verbs/rocev2"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

// Faults (Spec.Faults, the command's -rocev2-faults): packet loss injected into the rocev2 provider, so that a
// test harness can show that a peer (rxe, a NIC, another verbsrt) recovers
// from it with its own retransmission, and this side from the peer's.
//
// A spec is a comma-separated list of rules drop-DIR-KIND:N or
// drop-DIR-KIND:N-M. DIR is out (packets this side sends) or in (packets
// it receives, lost before its QP sees them); KIND is data (a requester's
// packets: SEND, WRITE, READ request, atomic) or ack (a responder's: ACK,
// NAK, READ response, atomic ACK). A rule drops the Nth to the Mth (1
// counts from the first) packet of its direction and kind that the first
// device's transport sends or receives, retransmissions included; rules
// of one direction and kind count the same packets. So drop-out-ack:1
// loses the first ACK this side's responder sends, and the peer's
// requester must time out and resend; drop-in-data:2 loses the second
// request packet that arrives, and this side's responder NAKs the gap.

// faultDir is a rule's direction: packets sent or received.
type faultDir int

const (
	faultOut faultDir = iota
	faultIn
)

// faultRule is one parsed rule of a -rocev2-faults spec.
type faultRule struct {
	text     string // as given, for the summary
	dir      faultDir
	ack      bool // responder's packets; false: requester's
	from, to uint64
	dropped  atomic.Uint64
}

// ParseFaults parses a -rocev2-faults spec (Spec.Faults); "" is no rule.
func ParseFaults(spec string) ([]*faultRule, error) {
	if spec == "" {
		return nil, nil
	}
	var rules []*faultRule
	for _, s := range strings.Split(spec, ",") {
		r, err := parseFaultRule(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("-rocev2-faults %q: %w", spec, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseFaultRule(s string) (*faultRule, error) {
	what, rng, ok := strings.Cut(s, ":")
	r := &faultRule{text: s}
	switch what {
	case "drop-out-data":
	case "drop-out-ack":
		r.ack = true
	case "drop-in-data":
		r.dir = faultIn
	case "drop-in-ack":
		r.dir, r.ack = faultIn, true
	default:
		return nil, fmt.Errorf("rule %q: want drop-out-data, drop-out-ack, drop-in-data or drop-in-ack, a colon and N or N-M", s)
	}
	if !ok {
		return nil, fmt.Errorf("rule %q: which packets? add :N or :N-M (1 is the first)", s)
	}
	lo, hi, isRange := strings.Cut(rng, "-")
	from, err1 := strconv.ParseUint(lo, 10, 64)
	to, err2 := from, error(nil)
	if isRange {
		to, err2 = strconv.ParseUint(hi, 10, 64)
	}
	if err1 != nil || err2 != nil || from < 1 || to < from {
		return nil, fmt.Errorf("rule %q: %q is not N or N-M with 1 <= N <= M", s, rng)
	}
	r.from, r.to = from, to
	return r, nil
}

// faultCounter numbers the packets of one direction and kind and drops
// those its rules name.
type faultCounter struct {
	ack   bool
	seen  atomic.Uint64
	rules []*faultRule
}

// match numbers p when it is of the counter's kind and reports whether a
// rule drops it. The transport calls it under its lock, one packet at a
// time per direction.
func (c *faultCounter) match(p *wire.Packet) bool {
	op := p.BTH.Opcode
	if (c.ack && !op.IsResponse()) || (!c.ack && !op.IsRequest()) {
		return false
	}
	n := c.seen.Add(1)
	for _, r := range c.rules {
		if n >= r.from && n <= r.to {
			r.dropped.Add(1)
			return true
		}
	}
	return false
}

// injectFaults installs rules on t: one transport rule per direction and
// kind that has rules, dropping every packet they name.
func injectFaults(t *rocev2.Transport, rules []*faultRule) ([]*faultCounter, error) {
	var counters []*faultCounter
	for _, dir := range []faultDir{faultOut, faultIn} {
		for _, ack := range []bool{false, true} {
			c := &faultCounter{ack: ack}
			for _, r := range rules {
				if r.dir == dir && r.ack == ack {
					c.rules = append(c.rules, r)
				}
			}
			if len(c.rules) == 0 {
				continue
			}
			f := rocev2.Fault{Action: rocev2.FaultDrop, Count: math.MaxInt, Match: c.match}
			if dir == faultOut {
				t.Inject(f)
			} else if err := t.InjectInbound(f); err != nil {
				return nil, err
			}
			counters = append(counters, c)
		}
	}
	return counters, nil
}

// reportFaults prints, for each rule, how many packets it dropped of how
// many of its direction and kind went by, then the transport's totals: the
// line a harness checks to know the faults happened.
func reportFaults(w io.Writer, dev string, t *rocev2.Transport, counters []*faultCounter) {
	for _, c := range counters {
		kind := map[bool]string{false: "data", true: "ack"}[c.ack]
		for _, r := range c.rules {
			dir := map[faultDir]string{faultOut: "sent", faultIn: "received"}[r.dir]
			fmt.Fprintf(w, "rocev2 fault %s: dropped %d of %d %s %s packets\n", r.text, r.dropped.Load(), c.seen.Load(), dir, kind)
		}
	}
	writePackets(w, dev, t)
}

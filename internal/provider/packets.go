package provider

import (
	"fmt"
	"io"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// ReportPackets writes the packet counts of each device of a rocev2
// provider: what a stalled exchange's two sides compare to find where
// packets stopped. Other providers have none to give.
func ReportPackets(w io.Writer, p verbs.Provider) {
	rp, ok := p.(*rocev2.Provider)
	if !ok {
		return
	}
	for i := 0; rp.Transport(i) != nil; i++ {
		writePackets(w, fmt.Sprintf("rocev2_%d", i), rp.Transport(i))
	}
}

// writePackets writes the packet counts of the transport of device dev on
// one line, the one ReportPackets and the fault report share.
func writePackets(w io.Writer, dev string, t *rocev2.Transport) {
	s := t.Stats()
	fmt.Fprintf(w, "rocev2 %s: sent %d packets, received %d; dropped runt %d, no QP %d, not the peer's %d, "+
		"bad ICRC %d, malformed %d, by faults %d; polls read the socket %d times for %d packets; %d reads found nothing\n",
		dev, s.Sent, s.Received, s.Runt, s.NoQP, s.NotPeer, s.BadICRC, s.Malformed, s.Faulted,
		s.PollReads, s.PollPackets, s.EmptyReads)
}

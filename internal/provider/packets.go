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
		s := rp.Transport(i).Stats()
		fmt.Fprintf(w, "rocev2 rocev2_%d: sent %d packets, received %d; dropped runt %d, no QP %d, not the peer's %d, "+
			"bad ICRC %d, malformed %d, by faults %d; polls read the socket %d times for %d packets; %d reads found nothing\n",
			i, s.Sent, s.Received, s.Runt, s.NoQP, s.NotPeer, s.BadICRC, s.Malformed, s.Faulted,
			s.PollReads, s.PollPackets, s.EmptyReads)
	}
}

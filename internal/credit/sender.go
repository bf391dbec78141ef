package credit

import (
	"fmt"
	"math"
	"time"

	"go.uber.org/atomic"
)

// ReturnAfter is how long a sender holding more credits than its initial
// window goes without spending any before it gives the rest back
// (Sender.ReturnIn). Giving them back at the first rest would shrink the
// window of a stream whenever its queue is empty for a moment, and the
// stream would then wait for credits in every burst.
const ReturnAfter = 10 * time.Millisecond

// Sender is the sending side's share of the protocol for one connection:
// the peer's receive credits, the one kept for reports, and the credit-only
// SENDs (a report, a window asked for, credits given back, the goodbye),
// whose headers report the credits of the connection's Receiver.
//
// One goroutine at a time, the sending actor, calls its methods, except
// Credits, Grant, WantReport, SayGoodbye and SaidGoodbye, which any
// goroutine may call. A nil *Sender is the sender of a connection without
// peer credits: it admits everything, carries no header and sends nothing
// of its own.
type Sender struct {
	r       *Receiver // whose credits the headers report
	initial int64     // the credits the peer granted first: an idle sender keeps these
	window  int64     // the peer's largest window

	credits atomic.Int64 // the peer's receives the sender may still consume
	report  atomic.Bool  // a credit-only SEND is wanted (WantReport)
	goodbye atomic.Bool  // a closing sender says goodbye (SayGoodbye)
	saidBye atomic.Bool  // the goodbye SEND was posted

	// wanted: the sender asked the peer for a larger window since it last
	// admitted a submission that spends credits.
	wanted bool
	// used: a submission spent credits since the sender last rested
	// (ReturnIn), and lastUse is when it rested after the last one.
	used    bool
	lastUse time.Duration
}

// NewSender returns the sender of a connection whose peer granted initial
// credits and may grant up to window, reporting r's credits.
func NewSender(initial, window int, r *Receiver) (*Sender, error) {
	if initial < 2 || window < initial {
		return nil, fmt.Errorf("peer credits: an initial window of %d and a largest of %d (at least 2, one kept for reports)",
			initial, window)
	}
	s := &Sender{r: r, initial: int64(initial), window: int64(window)}
	s.credits.Store(int64(initial))
	return s, nil
}

// Headers reports whether the connection's SENDs carry a header.
func (s *Sender) Headers() bool { return s != nil }

// Credits is the peer's receives the sender may still consume.
func (s *Sender) Credits() int64 {
	if s == nil {
		return 0
	}
	return s.credits.Load()
}

// MaxBatch is the most credits one submission may need: the peer's
// largest window less the credit kept for reports. A larger one would
// wait for good.
func (s *Sender) MaxBatch() int64 {
	if s == nil {
		return math.MaxInt64
	}
	return s.window - 1
}

// Grant adds n credits the peer reported and says whether the sender now
// holds more than its initial window.
func (s *Sender) Grant(n int64) (beyondInitial bool) {
	if s == nil {
		return false
	}
	return s.credits.Add(n) > s.initial
}

// Verdict is what Admit decides for a submission.
type Verdict uint8

// Admit's verdicts.
const (
	// Take: chain the submission now.
	Take Verdict = iota
	// Wait for the peer's credits; what is queued behind waits too, so
	// order is kept.
	Wait
	// Ask: wait, and ask the peer for a window the submission fits in, in
	// a credit-only SEND (Ask) chained now.
	Ask
	// Fail: a closing sender does not wait for credits that may never
	// come (the peer may be gone); the submission fails.
	Fail
)

// Admit is the admission rule, the one both the question whether a drain
// would post and the drain itself ask: may a submission that spends need
// credits be chained, when left credits are not yet spent by the chain?
// Data never takes the last credit, kept for a report.
func (s *Sender) Admit(need, left int64, closing bool) Verdict {
	switch {
	case s == nil || need == 0 || need <= left-1:
		return Take
	case closing:
		return Fail
	case !s.wanted && left >= 2:
		return Ask
	default:
		return Wait
	}
}

// Admitted records a submission Admit let through: a window asked for was
// for it, and the next one that waits may ask again.
func (s *Sender) Admitted(need int64) {
	if s != nil && need > 0 {
		s.wanted = false
	}
}

// Spend takes the n credits of chained data SENDs and WRITE_WITH_IMMs.
func (s *Sender) Spend(n int64) {
	if s == nil || n == 0 {
		return
	}
	s.credits.Sub(n)
	s.used = true
}

// Unspend gives back what WRs that were not posted took: n credits, and
// stamped credits of the Receiver their headers reported.
func (s *Sender) Unspend(n int64, stamped uint32) {
	if s == nil {
		return
	}
	if n > 0 {
		s.credits.Add(n)
	}
	if stamped > 0 {
		s.r.Untake(stamped)
	}
}

// Stamp returns the header of a data SEND, which reports the Receiver's
// unreported credits, and how many it reports. The header is stamped when
// the SEND is chained: one that waits carries nothing yet.
func (s *Sender) Stamp() (h Header, n uint32) {
	if s == nil {
		return h, 0
	}
	n = s.r.Take()
	return Encode(Fields{Credits: n, Kind: KindMessage}), n
}

// creditOnly returns the header of a credit-only SEND of f's kind and
// window, reporting the Receiver's unreported credits, and takes the
// credit it spends.
func (s *Sender) creditOnly(f Fields) (Header, uint32) {
	f.Credits = s.r.Take()
	s.credits.Dec()
	return Encode(f), f.Credits
}

// Ask returns the header of a credit-only SEND that asks the peer for a
// window the submission that needs need credits fits in, beside the one
// kept for reports: without it, a submission larger than the window
// would wait for credits nothing in flight brings. Admit said Ask.
func (s *Sender) Ask(need int64) (h Header, n uint32) {
	s.wanted = true
	return s.creditOnly(Fields{Kind: KindCredits, Window: clamp16(need + 1)})
}

// WantReport asks for a credit report in a credit-only SEND, if no SEND
// carries the credits first; it says whether this asked first (the sender
// should be woken).
func (s *Sender) WantReport() (first bool) {
	return s != nil && s.report.CompareAndSwap(false, true)
}

// ReportWanted reports whether a credit report is wanted and left credits
// (the reserve at least) can carry it.
func (s *Sender) ReportWanted(left int64) bool {
	return s != nil && s.report.Load() && left >= 1
}

// Report returns the header of the credit-only SEND a wanted report
// makes, and how many credits it reports, or ok false: none is wanted,
// left credits cannot carry it, or it is no longer due (data SENDs
// carried the credits meanwhile). The want is taken unless left credits
// cannot carry it.
func (s *Sender) Report(left int64) (h Header, n uint32, ok bool) {
	if !s.ReportWanted(left) {
		return h, 0, false
	}
	s.report.Store(false)
	if !s.r.Due() {
		return h, 0, false
	}
	if n = s.r.Take(); n == 0 {
		return h, 0, false
	}
	s.credits.Dec()
	return Encode(Fields{Credits: n, Kind: KindCredits}), n, true
}

// Pending reports whether the sender has something of its own to send
// once it can: a report, or credits beyond its initial window to give
// back.
func (s *Sender) Pending() bool {
	return s != nil && (s.report.Load() || s.HoldsExtra())
}

// HoldsExtra reports whether the sender holds more credits than its
// initial window.
func (s *Sender) HoldsExtra() bool {
	return s != nil && s.credits.Load() > s.initial
}

// ReturnIn is called when the sender rests with nothing queued at now (a
// monotonic clock): it says how long until the credits beyond the initial
// window are to be given back (Return), 0 for now.
func (s *Sender) ReturnIn(now time.Duration) time.Duration {
	if s == nil {
		return ReturnAfter
	}
	if s.used {
		s.used, s.lastUse = false, now
	}
	if idle := now - s.lastUse; idle < ReturnAfter {
		return ReturnAfter - idle
	}
	return 0
}

// Return returns the header of a credit-only SEND that gives the peer back
// the credits beyond the initial window (returned), less the one the SEND
// spends, which the peer reports back, so that the sender keeps its
// initial window; ok false when there are none. The receives they stand
// for serve the peer's other connections. A Return that is not posted
// gives back returned with Unspend, besides its own credit.
func (s *Sender) Return() (h Header, n uint32, returned int64, ok bool) {
	if !s.HoldsExtra() {
		return h, 0, 0, false
	}
	returned = s.credits.Load() - s.initial
	h, n = s.creditOnly(Fields{Kind: KindCredits, Return: true, Window: clamp16(returned)})
	s.credits.Sub(returned)
	return h, n, returned, true
}

// SayGoodbye makes a closing sender's last SEND a goodbye.
func (s *Sender) SayGoodbye() {
	if s != nil {
		s.goodbye.Store(true)
	}
}

// Goodbye returns the header of the goodbye SEND, a credit report that
// also says the connection is over, once, if it was asked for
// (SayGoodbye) and a credit is left for it: the one kept for reports.
func (s *Sender) Goodbye() (h Header, n uint32, ok bool) {
	if s == nil || !s.goodbye.CompareAndSwap(true, false) || s.credits.Load() < 1 {
		return h, 0, false
	}
	h, n = s.creditOnly(Fields{Kind: KindGoodbye})
	return h, n, true
}

// Said records whether the goodbye SEND was posted.
func (s *Sender) Said(posted bool) {
	if s != nil {
		s.saidBye.Store(posted)
	}
}

// SaidGoodbye reports whether the goodbye SEND was posted.
func (s *Sender) SaidGoodbye() bool { return s != nil && s.saidBye.Load() }

package credit

import (
	"testing"
	"time"
)

func newSender(t *testing.T, initial, window int, r *Receiver) *Sender {
	t.Helper()
	s, err := NewSender(initial, window, r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAdmit: data never takes the last credit; a submission that does not
// fit waits, asks once for a window it fits in when two credits are left,
// and fails when the sender closes.
func TestAdmit(t *testing.T) {
	for _, c := range []struct {
		name          string
		need, left    int64
		wanted, close bool
		want          Verdict
	}{
		{"no credit needed", 0, 0, false, false, Take},
		{"fits beside the reserve", 2, 3, false, false, Take},
		{"would take the reserve", 3, 3, false, false, Ask},
		{"only the reserve", 1, 1, false, false, Wait},
		{"only the reserve, closing", 1, 1, false, true, Fail},
		{"none", 1, 0, false, false, Wait},
		{"asked already", 5, 3, true, false, Wait},
		{"asked already, fits", 2, 3, true, false, Take},
		{"closing", 5, 3, false, true, Fail},
	} {
		s := newSender(t, 3, 16, &Receiver{})
		s.wanted = c.wanted
		if got := s.Admit(c.need, c.left, c.close); got != c.want {
			t.Errorf("%s: Admit(%d, %d, closing %v) = %v, want %v", c.name, c.need, c.left, c.close, got, c.want)
		}
	}
	var none *Sender
	if none.Admit(100, 0, false) != Take || none.Headers() || none.Pending() || none.MaxBatch() < 1<<40 {
		t.Error("a connection without peer credits is held back")
	}
}

// TestAskOncePerWaitingSubmission: a submission that waits asks for a
// window one larger than its need, once; the next one that waits may ask
// again after it is admitted.
func TestAskOncePerWaitingSubmission(t *testing.T) {
	var r Receiver
	r.Join(3, 16)
	s := newSender(t, 3, 16, &r)
	if v := s.Admit(5, s.Credits(), false); v != Ask {
		t.Fatalf("first look: %v, want Ask", v)
	}
	h, _ := s.Ask(5)
	f, _ := Decode(h[:], HeaderSize)
	if f.Kind != KindCredits || f.Asked() != 6 || s.Credits() != 2 {
		t.Fatalf("Ask(5): %+v, %d credits left; want a report asking 6, 2 left", f, s.Credits())
	}
	if v := s.Admit(5, s.Credits(), false); v != Wait {
		t.Fatalf("asked already: %v, want Wait", v)
	}
	s.Grant(6)
	if v := s.Admit(5, s.Credits(), false); v != Take {
		t.Fatalf("granted: %v, want Take", v)
	}
	s.Admitted(5)
	s.Spend(5)
	if v := s.Admit(5, s.Credits(), false); v != Ask {
		t.Fatalf("the next submission: %v, want Ask", v)
	}
}

// TestReportWithTheReserve: a sender that spent its data credits still
// carries a due report with the credit it kept; a report no longer due
// (data SENDs carried the credits) is dropped.
func TestReportWithTheReserve(t *testing.T) {
	var r Receiver
	r.Join(3, 16)
	s := newSender(t, 3, 16, &r)
	s.Spend(2)
	r.Consumed()
	r.Consumed()
	if !r.Grant(2) || !s.WantReport() || s.WantReport() {
		t.Fatal("a report is not wanted once")
	}
	h, n, ok := s.Report(s.Credits())
	if f, _ := Decode(h[:], HeaderSize); !ok || n != 2 || f.Credits != 2 || f.Kind != KindCredits || s.Credits() != 0 {
		t.Fatalf("Report with the reserve: %+v, %d, %v, %d credits left; want 2 reported, none left", f, n, ok, s.Credits())
	}
	r.Consumed()
	r.Grant(1)
	s.WantReport()
	if _, _, ok := s.Report(s.Credits()); ok || !s.ReportWanted(1) {
		t.Fatal("a report without a credit to carry it, or its want lost")
	}
	s.Grant(1)
	s.Stamp() // a data SEND carries the credit first
	if _, _, ok := s.Report(s.Credits()); ok || s.ReportWanted(s.Credits()) || s.Credits() != 1 {
		t.Fatal("a report no longer due was sent, or kept wanted")
	}
}

// TestUnspend: WRs not posted give back their credits and the credits
// their headers reported.
func TestUnspend(t *testing.T) {
	var r Receiver
	r.Join(3, 16)
	s := newSender(t, 3, 16, &r)
	r.Consumed()
	r.Grant(1)
	_, n := s.Stamp()
	s.Spend(1)
	s.Unspend(1, n)
	if s.Credits() != 3 || r.Unreported() != 1 {
		t.Errorf("after Unspend: %d credits, %d unreported; want 3, 1", s.Credits(), r.Unreported())
	}
}

// TestReturnAfterIdle: credits beyond the initial window go back once the
// sender has spent none for ReturnAfter, in a report that spends one of
// them; the sender keeps its initial window less that one.
func TestReturnAfterIdle(t *testing.T) {
	var r Receiver
	r.Join(3, 16)
	s := newSender(t, 3, 16, &r)
	if _, _, _, ok := s.Return(); ok {
		t.Fatal("returned credits within the initial window")
	}
	now := time.Second
	s.Grant(10)
	s.Spend(1)
	if !s.HoldsExtra() || !s.Pending() {
		t.Fatal("holding 12 of an initial 3: nothing pending")
	}
	if d := s.ReturnIn(now); d != ReturnAfter {
		t.Fatalf("resting after a spend: return in %v, want %v", d, ReturnAfter)
	}
	if d := s.ReturnIn(now + ReturnAfter/2); d != ReturnAfter/2 {
		t.Fatalf("half-way: return in %v, want %v", d, ReturnAfter/2)
	}
	if d := s.ReturnIn(now + ReturnAfter); d != 0 {
		t.Fatalf("idle for ReturnAfter: return in %v, want now", d)
	}
	h, _, returned, ok := s.Return()
	f, _ := Decode(h[:], HeaderSize)
	if !ok || returned != 9 || f.Returned() != 9 || s.Credits() != 2 {
		t.Fatalf("Return: %+v, %d returned, %d left; want 9 returned, 2 left", f, returned, s.Credits())
	}
	s.Unspend(returned+1, 0) // not posted
	if s.Credits() != 12 {
		t.Fatalf("a Return not posted: %d credits, want 12", s.Credits())
	}
	s.Spend(1)
	if d := s.ReturnIn(now + 2*ReturnAfter); d != ReturnAfter {
		t.Fatalf("spent again: return in %v, want %v", d, ReturnAfter)
	}
}

// TestGoodbye: the goodbye is sent once, when asked for, with a credit
// left: the reserve.
func TestGoodbye(t *testing.T) {
	var r Receiver
	r.Join(3, 16)
	s := newSender(t, 3, 16, &r)
	if _, _, ok := s.Goodbye(); ok {
		t.Fatal("a goodbye not asked for")
	}
	s.SayGoodbye()
	s.Spend(2)
	h, _, ok := s.Goodbye()
	if f, _ := Decode(h[:], HeaderSize); !ok || f.Kind != KindGoodbye || s.Credits() != 0 {
		t.Fatalf("Goodbye with the reserve: %+v, %v", f, ok)
	}
	if _, _, ok := s.Goodbye(); ok {
		t.Fatal("a second goodbye")
	}
	s2 := newSender(t, 3, 16, &r)
	s2.SayGoodbye()
	s2.Spend(3)
	if _, _, ok := s2.Goodbye(); ok {
		t.Fatal("a goodbye without a credit")
	}
}

// TestNewSender refuses a window that cannot keep a credit for reports.
func TestNewSender(t *testing.T) {
	for _, c := range []struct{ initial, window int }{{1, 16}, {0, 0}, {4, 3}} {
		if _, err := NewSender(c.initial, c.window, &Receiver{}); err == nil {
			t.Errorf("NewSender(%d, %d): no error", c.initial, c.window)
		}
	}
}

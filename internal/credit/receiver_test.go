package credit

import "testing"

// receiverAt returns a receiver with a window of window credits, owed of
// them owed, the rest backed, and unreported of those not reported.
func receiverAt(window, owed int, unreported int64) *Receiver {
	r := &Receiver{}
	r.Join(3, 64)
	r.window, r.want, r.backed, r.owed = window, window, window-owed, owed
	r.setThreshold()
	r.unreported.Store(unreported)
	return r
}

// TestReportDueCountsOnlyBackedCredits: a report is due at half the
// window that receives back, not half the whole window: a receiver whose
// pool owes most of its window reports what it has, since its peer may
// hold only the credit kept for reports.
func TestReportDueCountsOnlyBackedCredits(t *testing.T) {
	for _, c := range []struct {
		window, owed int
		unreported   int64
		due          bool
	}{
		{3, 0, 0, false},
		{3, 0, 1, false},
		{3, 0, 2, true}, // a request and its reply pass without a report
		{13, 0, 4, false},
		{13, 0, 7, true},
		{13, 8, 4, true}, // 8 owed: the window receives back is 5
		{13, 8, 2, false},
		{13, 12, 1, true},
		{13, 13, 1, true},
	} {
		r := receiverAt(c.window, c.owed, c.unreported)
		if got := r.Due(); got != c.due {
			t.Errorf("window %d, %d owed, %d unreported: due %v, want %v", c.window, c.owed, c.unreported, got, c.due)
		}
	}
}

// TestReceiverOwingWhatItCannotBack walks a receiver through the first
// stall: its peer grows the window to 13 and spends 12 credits, the pool
// posts receives for only 4 of them. Those 4 make a report due: the
// window receives back is 5, not 13.
func TestReceiverOwingWhatItCannotBack(t *testing.T) {
	var r Receiver
	r.Join(3, 16)
	r.Adjust(Fields{Kind: KindCredits, Window: 13})
	r.Grow(100)
	if r.Window() != 13 || r.Owed() != 10 {
		t.Fatalf("grown to 13: window %d, %d owed; want 13, 10 owed", r.Window(), r.Owed())
	}
	if !r.Grant(10) || r.Take() != 10 {
		t.Fatal("the growth, backed, is not reported")
	}
	for range 12 {
		r.Consumed()
	}
	if r.Grant(0) {
		t.Fatal("a report due with nothing unreported")
	}
	if !r.Grant(4) {
		t.Fatalf("window %d, %d owed, %d backed, %d unreported: no report due; the peer holds only its reserve",
			r.Window(), r.Owed(), r.Backed(), r.Unreported())
	}
}

// TestWindowMoves: the window grows by one on backlog and to what is asked,
// up to the depth and as receives can back it, and shrinks only by
// credits given back, to no less than the initial window.
func TestWindowMoves(t *testing.T) {
	type step struct {
		f         Fields
		available int // receives the caller could back (Grow)
		grant     int // owed credits backed now (Grant)
	}
	for _, c := range []struct {
		name        string
		steps       []step
		window, own int // want: window and owed
		freed       int // credits the last step freed
	}{
		{"backlog grows by one", []step{{f: Fields{Backlog: true}, available: 100}}, 4, 1, 0},
		{"twice", []step{{f: Fields{Backlog: true}, available: 100, grant: 1}, {f: Fields{Backlog: true}, available: 100}}, 5, 1, 0},
		{"asked", []step{{f: Fields{Kind: KindCredits, Window: 10}, available: 100}}, 10, 7, 0},
		{"asked beyond the depth", []step{{f: Fields{Kind: KindCredits, Window: 1000}, available: 100}}, 16, 13, 0},
		{"as receives can back", []step{{f: Fields{Kind: KindCredits, Window: 10}, available: 4}}, 7, 4, 0},
		{"none to back", []step{{f: Fields{Kind: KindCredits, Window: 10}, available: 0}}, 3, 0, 0},
		{"given back", []step{{f: Fields{Kind: KindCredits, Window: 10}, available: 100, grant: 7},
			{f: Fields{Kind: KindCredits, Return: true, Window: 5}}}, 5, 0, 5},
		{"given back, to the initial window", []step{{f: Fields{Kind: KindCredits, Window: 10}, available: 100, grant: 7},
			{f: Fields{Kind: KindCredits, Return: true, Window: 50}}}, 3, 0, 7},
		{"plain message", []step{{f: Fields{}, available: 100}}, 3, 0, 0},
	} {
		var r Receiver
		r.Join(3, 16)
		freed := 0
		for _, s := range c.steps {
			freed = r.Adjust(s.f)
			r.Grow(s.available)
			r.Grant(s.grant)
		}
		if r.Window() != c.window || r.Owed() != c.own || freed != c.freed {
			t.Errorf("%s: window %d, %d owed, %d freed; want %d, %d owed, %d freed", c.name, r.Window(), r.Owed(), freed, c.window, c.own, c.freed)
		}
		if r.Backed()+r.Owed() != r.Window() {
			t.Errorf("%s: %d backed and %d owed of a window of %d", c.name, r.Backed(), r.Owed(), r.Window())
		}
	}
}

// TestLeaveFreesTheBackedCredits: a receiver whose connection is gone gives
// back the credits receives backed, and owes nothing.
func TestLeaveFreesTheBackedCredits(t *testing.T) {
	var r Receiver
	r.Join(3, 16)
	r.Consumed()
	if freed := r.Leave(); freed != 2 || r.Owed() != 0 || r.Backed() != 0 {
		t.Errorf("Leave: %d freed, %d owed, %d backed; want 2, 0, 0", freed, r.Owed(), r.Backed())
	}
}

package credit

import "testing"

// TestStallsOfASharedPool drives both machines of a connection through
// the stall of a receive pool under its memory limit: the sender (A)
// holds only the credit kept for reports and has a SEND queued, the
// receiver (B) owes most of its window (no buffer to post for it) and
// its application holds its messages while it waits for the next, so B
// sends no data that could carry its credits. Only a report B finds due
// moves A; counted over the whole window, none is.
func TestStallsOfASharedPool(t *testing.T) {
	for _, c := range []stallCase{
		{"most of the window owed", 13, 12, 4, 4},
		{"all but one owed", 13, 12, 1, 1},
		{"a small window", 5, 4, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) { stall(t, c) })
	}
}

type stallCase struct {
	name        string
	window      int // what A asked B's window to grow to
	spent       int // credits A spent of it
	posted      int // the receives B's pool could post again
	wantCredits int64
}

func stall(t *testing.T, c stallCase) {
	t.Helper()
	var ra, rb Receiver
	ra.Join(3, 16)
	rb.Join(3, 16)
	a := newSender(t, 3, 16, &ra)
	b := newSender(t, 3, 16, &rb)
	// A asks for the window, B grows it and reports it.
	h, _ := a.Ask(int64(c.window - 1))
	rb.Consumed()
	rb.Adjust(decode(t, h))
	rb.Grow(100)
	rb.Grant(rb.Owed())
	b.WantReport()
	h, _, ok := b.Report(b.Credits())
	if !ok {
		t.Fatalf("%s: B does not report its window of %d", c.name, rb.Window())
	}
	a.Grant(int64(decode(t, h).Credits))
	// A spends its data credits: all but the reserve.
	for range c.spent {
		if v := a.Admit(1, a.Credits(), false); v != Take {
			t.Fatalf("%s: the SEND after %d of %d credits: %v", c.name, c.spent, a.Credits(), v)
		}
		h, _ := a.Stamp()
		a.Spend(1)
		rb.Consumed()
		rb.Adjust(decode(t, h))
	}
	if a.Credits() != 1 || a.Admit(1, a.Credits(), false) != Wait {
		t.Fatalf("%s: A holds %d credits, not only its reserve", c.name, a.Credits())
	}
	// B's pool posts what it can; B has nothing to send.
	if rb.Grant(c.posted) {
		b.WantReport()
	}
	h, _, ok = b.Report(b.Credits())
	if !ok {
		t.Fatalf("%s: window %d, %d owed, %d unreported: B reports nothing, A holds only its reserve: stalled",
			c.name, rb.Window(), rb.Owed(), rb.Unreported())
	}
	if f := decode(t, h); f.Credits != uint32(c.wantCredits) {
		t.Fatalf("%s: B reports %d credits, want %d", c.name, f.Credits, c.wantCredits)
	}
	a.Grant(int64(decode(t, h).Credits))
	if v := a.Admit(1, a.Credits(), false); v != Take {
		t.Errorf("%s: A's SEND after the report: %v with %d credits", c.name, v, a.Credits())
	}
}

func decode(t *testing.T, h Header) Fields {
	t.Helper()
	f, err := Decode(h[:], HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

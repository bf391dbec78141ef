package benchkit

import (
	"os"
	goruntime "runtime"
	"testing"
)

func TestReadsTheProcess(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("read on Linux only")
	}
	if n := Threads(); n < 1 {
		t.Errorf("Threads() = %d", n)
	}
	before := OpenFDs()
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if after := OpenFDs(); after != before+1 {
		t.Errorf("OpenFDs() went from %d to %d with one file opened", before, after)
	}
	f.Close()
	if c := CPUTime(); c <= 0 {
		t.Errorf("CPUTime() = %v", c)
	}
	if LoadAverage() == "?" {
		t.Error("no load average")
	}
}

// TestCoreToCore: a cache line's round trip between two threads is
// measured, more than 0; with one P there is no second thread to measure
// it against, and it is 0. Only the sign is asserted: a busy machine
// stretches each round trip to a scheduler's time slice.
func TestCoreToCore(t *testing.T) {
	if goruntime.GOMAXPROCS(0) < 2 {
		if d := CoreToCore(10); d != 0 {
			t.Errorf("with 1 P: %v, want 0", d)
		}
		return
	}
	d := CoreToCore(200)
	if d <= 0 {
		t.Errorf("CoreToCore = %v, want a positive time", d)
	}
	t.Logf("%v a round trip", d)
}

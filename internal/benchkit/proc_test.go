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

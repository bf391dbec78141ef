package provider

import (
	"strings"
	"testing"
)

// TestParseFaults: the rules -rocev2-faults takes, and the specs it
// refuses, each with an error that says what a rule looks like.
func TestParseFaults(t *testing.T) {
	rules, err := ParseFaults("drop-out-ack:1, drop-in-data:2-3,drop-out-data:7,drop-in-ack:4-4")
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		dir      faultDir
		ack      bool
		from, to uint64
	}
	want := []rule{{faultOut, true, 1, 1}, {faultIn, false, 2, 3}, {faultOut, false, 7, 7}, {faultIn, true, 4, 4}}
	if len(rules) != len(want) {
		t.Fatalf("%d rules, want %d", len(rules), len(want))
	}
	for i, r := range rules {
		if got := (rule{r.dir, r.ack, r.from, r.to}); got != want[i] {
			t.Errorf("rule %d (%s): %+v, want %+v", i, r.text, got, want[i])
		}
	}
	if rules, err := ParseFaults(""); rules != nil || err != nil {
		t.Errorf(`"": %v, %v; want no rule`, rules, err)
	}
	for _, bad := range []string{"drop-out-ack", "drop-out-ack:0", "drop-out-ack:3-2", "drop-out-ack:x", "drop-sideways-ack:1",
		"dup-out-data:1", "drop-out-ack:1,", "drop-out-ack:-2", "drop-out-ack:1-2-3"} {
		if _, err := ParseFaults(bad); err == nil || !strings.Contains(err.Error(), "-rocev2-faults") {
			t.Errorf("%q: %v, want an error naming -rocev2-faults", bad, err)
		}
	}
}

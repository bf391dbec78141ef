package main

import (
	"io"
	"strings"
	"testing"
)

// TestShortSoak runs both phases briefly: every operation and cycle
// succeeds, and each phase prints its samples and its verdict.
func TestShortSoak(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-ops", "3000", "-cycles", "20", "-samples", "4", "-callers", "4"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	for _, want := range []string{"| ops | elapsed |", "| 3000 |", "from ", "| cycles | elapsed |", "| 20 |", " cycles: HeapInuse "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %q:\n%s", want, &out)
		}
	}
}

func TestParseRefusesNonsense(t *testing.T) {
	for _, args := range [][]string{{"-callers", "0"}, {"-ops", "-1"}, {"-samples", "1"}, {"extra"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted it", args)
		}
	}
}

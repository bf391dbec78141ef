package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: run must
// leave nothing behind once it returns, on success and on error.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

func TestRun(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "50", "-s", "4096"},
		{"-n", "20", "-s", "1"},
		{"-n", "10", "-s", "10000"}, // larger than the default message size
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, args, &out); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			for _, re := range []string{
				`(?m)^  local address:  QPN 0x[0-9a-f]{6} \(client\)$`,
				`(?m)^\d+ bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`,
				`(?m)^` + args[1] + ` iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`,
				`(?m)^verified ` + args[1] + ` replies of ` + args[3] + ` bytes: OK$`,
			} {
				if !regexp.MustCompile(re).MatchString(out.String()) {
					t.Errorf("output does not match %s:\n%s", re, out.String())
				}
			}
		})
	}
}

func TestRunBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "0"},
		{"-s", "0"},
		{"-s", "99999999"},
		{"-bogus"},
		{"extra"},
	} {
		if err := run(context.Background(), args, new(bytes.Buffer)); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

func TestCheck(t *testing.T) {
	want := make([]byte, 100)
	fill(want, 3)
	stale := make([]byte, 100)
	fill(stale, 2)
	flipped := bytes.Clone(want)
	flipped[57] ^= 1
	for _, tc := range []struct {
		name string
		got  []byte
		err  string
	}{
		{"equal", bytes.Clone(want), ""},
		{"short", want[:99], "has 99 bytes, sent 100"},
		{"stale", stale, "differs at byte 0"},
		{"flipped", flipped, "differs at byte 57"},
	} {
		err := check(tc.got, want, 3)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: check = %v, want %q", tc.name, err, tc.err)
		}
	}
}

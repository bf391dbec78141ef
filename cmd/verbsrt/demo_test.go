package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := demo(&out, 4096, 64); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"RDMA WRITE", "RDMA READ", "SEND with immediate", "FETCH_AND_ADD", "CMP_AND_SWP",
		"64 WRITEs, 1 doorbell", "all transfers verified"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "MISMATCH") {
		t.Errorf("a transfer did not verify:\n%s", out.String())
	}
}

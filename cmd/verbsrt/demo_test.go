package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemo runs the demo on soft and on rocev2 (two sockets on ::1) and
// checks that every transfer verified.
func TestDemo(t *testing.T) {
	for _, name := range []string{"soft", "rocev2"} {
		t.Run(name, func(t *testing.T) { testDemo(t, name) })
	}
}

func testDemo(t *testing.T, name string) {
	p, closeProv, err := openProvider(providerSpec{name: name, addr: rocev2DefaultAddr}, 2)
	if err != nil {
		if name == "rocev2" && strings.Contains(err.Error(), "cannot bind") {
			t.Skipf("no IPv6 loopback (::1), which the rocev2 provider binds: %v", err)
		}
		t.Fatal(err)
	}
	defer closeProv()
	var out bytes.Buffer
	if err := demo(&out, p, 4096, 64); err != nil {
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

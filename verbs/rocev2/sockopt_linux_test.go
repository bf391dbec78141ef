package rocev2

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestSocketAcceptsZeroChecksum checks that the transport's socket accepts
// IPv6 UDP datagrams without a checksum, which rxe sends.
func TestSocketAcceptsZeroChecksum(t *testing.T) {
	a, _ := listenPair(t, nil)
	rc, err := a.conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	rc.Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_UDP, udpNoCheck6RX)
	})
	if gerr != nil || v != 1 {
		t.Fatalf("UDP_NO_CHECK6_RX = %d, %v", v, gerr)
	}
}

// TestReadBufferReported checks that a transport asks for the receive
// buffer it is configured with, forcing it past net.core.rmem_max where the
// process may, and that Stats reports what the kernel granted.
func TestReadBufferReported(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Skip(err)
	}
	rmemMax, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{32 << 10, 2*rmemMax + 4096} {
		tr, err := Listen(TransportConfig{Addr: loopback6, ReadBuffer: want})
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		var got int
		var gerr error
		rc, _ := tr.conn.SyscallConn()
		rc.Control(func(fd uintptr) {
			got, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		})
		st := tr.Stats()
		tr.Close()
		if gerr != nil {
			t.Fatal(gerr)
		}
		if st.ReadBuffer != uint64(got) {
			t.Errorf("asked %d: Stats.ReadBuffer %d, SO_RCVBUF %d", want, st.ReadBuffer, got)
		}
		// Linux grants twice the request, capped at twice rmem_max
		// unless SO_RCVBUFFORCE was allowed.
		if floor := 2 * min(want, rmemMax); got < floor {
			t.Errorf("asked %d (rmem_max %d): granted %d, want at least %d", want, rmemMax, got, floor)
		}
		t.Logf("asked %d, rmem_max %d: granted %d", want, rmemMax, got)
	}
}

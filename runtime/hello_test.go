package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// validHello is a hello this runtime takes, as a line of the handshake.
const validHello = `{"version":4,"qpn":17,"psn":0,"lid":0,"gid":"::ffff:10.77.0.1","recv_depth":64,"window":3,"msg_size":4096,` +
	`"mtu":1024,"max_rd_atomic":16,"max_dest_rd_atomic":8}` + "\n"

// TestParseHelloRefusesEveryFieldOutOfRange: each field of the peer's
// hello beyond what the runtime can honour is refused with ErrProtocol,
// and the error names the field.
func TestParseHelloRefusesEveryFieldOutOfRange(t *testing.T) {
	if _, err := parseHello([]byte(validHello)); err != nil {
		t.Fatalf("a valid hello: %v", err)
	}
	for _, c := range []struct{ replace, with, field string }{
		{`"version":4`, `"version":99`, "version"},
		{`"version":4`, `"version":0`, "version"},
		{`"version":4`, `"version":3`, "version 3, this runtime speaks version 4"},
		{`"qpn":17`, `"qpn":4294967295`, "qpn"},
		{`"qpn":17`, `"qpn":16777216`, "qpn"},
		{`"qpn":17`, `"qpn":0`, "qpn"},
		{`"qpn":17`, `"qpn":1`, "qpn"},
		{`"qpn":17`, `"qpn":-1`, "qpn"},
		{`"psn":0`, `"psn":16777216`, "psn"},
		{`"lid":0`, `"lid":65536`, "lid"},
		{`"gid":"::ffff:10.77.0.1"`, `"gid":"not a gid"`, "gid"},
		{`"gid":"::ffff:10.77.0.1"`, `"gid":"fe80::1%eth0"`, "gid"},
		{`"gid":"::ffff:10.77.0.1"`, `"gid":""`, "gid"},
		{`"gid":"::ffff:10.77.0.1"`, `"gid":` + fmt.Sprintf("%q", strings.Repeat("0", 300)), "gid"},
		{`"recv_depth":64`, `"recv_depth":4611686018427387904`, "recv_depth"},
		{`"recv_depth":64`, `"recv_depth":65537`, "recv_depth"},
		{`"recv_depth":64`, `"recv_depth":2`, "window"},
		{`"recv_depth":64`, `"recv_depth":-1`, "recv_depth"},
		{`"window":3`, `"window":1`, "window"},
		{`"window":3`, `"window":1000000`, "window"},
		{`"msg_size":4096`, `"msg_size":4611686018427387904`, "msg_size"},
		{`"msg_size":4096`, `"msg_size":1073741825`, "msg_size"},
		{`"msg_size":4096`, `"msg_size":0`, "msg_size"},
		{`"msg_size":4096`, `"msg_size":1e300`, "msg_size"},
		{`"mtu":1024`, `"mtu":0`, "mtu"},
		{`"mtu":1024`, `"mtu":128`, "mtu"},
		{`"mtu":1024`, `"mtu":1500`, "mtu"},
		{`"mtu":1024`, `"mtu":8192`, "mtu"},
		{`"mtu":1024`, `"mtu":-1024`, "mtu"},
		{`"mtu":1024`, `"mtu":4294968320`, "mtu"},
		{`,"mtu":1024`, ``, "mtu"},
		{`"max_rd_atomic":16`, `"max_rd_atomic":0`, "max_rd_atomic"},
		{`"max_rd_atomic":16`, `"max_rd_atomic":17`, "max_rd_atomic"},
		{`"max_rd_atomic":16`, `"max_rd_atomic":272`, "max_rd_atomic"},
		{`"max_dest_rd_atomic":8`, `"max_dest_rd_atomic":0`, "max_dest_rd_atomic"},
		{`"max_dest_rd_atomic":8`, `"max_dest_rd_atomic":-8`, "max_dest_rd_atomic"},
		{`"max_dest_rd_atomic":8`, `"max_dest_rd_atomic":255`, "max_dest_rd_atomic"},
		{`"max_dest_rd_atomic":8`, `"max_dest_rd_atomic":8,"provider":"soft\u001b[2J"`, "provider"},
		{`"max_dest_rd_atomic":8`, `"max_dest_rd_atomic":8,"provider":"` + strings.Repeat("x", 33) + `"`, "provider"},
		{`"max_dest_rd_atomic":8`, `"max_dest_rd_atomic":8,"transport":"ro ce"`, "transport"},
	} {
		line := strings.Replace(validHello, c.replace, c.with, 1)
		_, err := parseHello([]byte(line))
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want ErrProtocol naming %s", c.with, err, c.field)
		}
	}
	for _, line := range []string{"", "\n", "ready\n", "GET / HTTP/1.0\r\n", "{\n", "null\n", "[]\n", `"x"` + "\n"} {
		if _, err := parseHello([]byte(line)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: %v, want ErrProtocol", line, err)
		}
	}
}

// TestReadLineIsBounded: a line longer than maxHelloLine is refused after
// maxHelloLine bytes, however long it goes on.
func TestReadLineIsBounded(t *testing.T) {
	long := &endlessLine{}
	br := bufio.NewReaderSize(long, maxHelloLine)
	if _, err := readLine(br, "hello"); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("an endless line: %v, want ErrProtocol saying it is too long", err)
	}
	if long.read > maxHelloLine {
		t.Errorf("read %d bytes of a line, want at most %d", long.read, maxHelloLine)
	}
}

// endlessLine is a line that never ends, and counts what was read of it.
type endlessLine struct{ read int }

func (l *endlessLine) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	l.read += len(p)
	return len(p), nil
}

// TestRefusalCarriesItsCause: a refusal read back matches ErrRefused and
// the cause it was written for, and fits in a line of the handshake
// however long its text.
func TestRefusalCarriesItsCause(t *testing.T) {
	for _, cause := range []error{ErrNoMemory, syscall.EMFILE, syscall.ENFILE, ErrProtocol} {
		line := refusal(fmt.Errorf("verbsrt: because %s: %w", strings.Repeat("very ", 200), cause))
		if len(line) > maxHelloLine {
			t.Errorf("a refusal of %d bytes, longer than a line may be", len(line))
		}
		_, err := parseHello(line)
		if !errors.Is(err, ErrRefused) || !errors.Is(err, cause) {
			t.Errorf("refusal for %v read back as %v, want ErrRefused and the cause", cause, err)
		}
		if err := readReady(bufio.NewReader(strings.NewReader(string(line)))); !errors.Is(err, ErrRefused) || !errors.Is(err, cause) {
			t.Errorf("refusal for %v in place of ready read back as %v, want ErrRefused and the cause", cause, err)
		}
	}
}

// FuzzParseHello: whatever the line, parseHello does not panic, and a
// hello it takes is one the runtime can honour: every field within its
// range, and the same hello once written and parsed again.
//
//	go test -run '^$' -fuzz FuzzParseHello ./runtime
func FuzzParseHello(f *testing.F) {
	f.Add([]byte(validHello))
	f.Add([]byte(`{"version":4,"qpn":16777215,"psn":16777215,"lid":65535,"gid":"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff","recv_depth":65536,"window":65536,"msg_size":1073741824,"mtu":4096,"max_rd_atomic":16,"max_dest_rd_atomic":16}`))
	f.Add([]byte(`{"version":4,"qpn":4294967295,"psn":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4611686018427387904,"mtu":256,"max_rd_atomic":1,"max_dest_rd_atomic":1}`))
	f.Add([]byte(`{"version":4,"error":"verbsrt: out of registered memory","cause":"no_memory"}`))
	f.Add([]byte(`{"version":4,"qpn":17,"gid":"1.2.3.4","recv_depth":3,"window":3,"msg_size":1,"mtu":2048,"max_rd_atomic":4,"max_dest_rd_atomic":4,"extra":[1,2,{}]}`))
	f.Add([]byte(`{"version":3,"qpn":17,"psn":0,"lid":0,"gid":"::ffff:10.77.0.1","recv_depth":64,"window":3,"msg_size":4096}`))
	f.Add([]byte("ready\n"))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte("0000:000011:000000:fe800000000000000000000000000001\n")) // ibv_rc_pingpong's own line
	f.Add([]byte{0xff, 0x00, '{', '"'})
	f.Fuzz(func(t *testing.T, line []byte) {
		h, err := parseHello(line)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrRefused) {
				t.Fatalf("%q: %v, want ErrProtocol or ErrRefused", line, err)
			}
			return
		}
		switch {
		case h.Version != helloVersion,
			h.QPN < minQPN || h.QPN > maxQPN,
			h.PSN > maxPSN,
			h.RecvDepth < 2 || h.RecvDepth > maxHelloWindow,
			h.Window < 2 || h.Window > h.RecvDepth,
			h.MsgSize < 1 || h.MsgSize > maxHelloMsgSize,
			h.MTU == 0 || verbs.MTUFromBytes(h.MTU).Bytes() != h.MTU,
			h.MaxRdAtomic < 1 || h.MaxRdAtomic > maxRdAtomic,
			h.MaxDestRdAtomic < 1 || h.MaxDestRdAtomic > maxRdAtomic,
			h.Error != "" || h.Cause != "":
			t.Fatalf("%q taken as %+v, out of range", line, h)
		}
		if a, err := netip.ParseAddr(h.GID); err != nil || a.As16() != [16]byte(h.gid) {
			t.Fatalf("%q: gid %q taken as %v", line, h.GID, h.gid)
		}
		again, err := parseHello(marshalLine(h))
		if err != nil || again != h {
			t.Fatalf("%q: %+v written and parsed again is %+v, %v", line, h, again, err)
		}
	})
}

// TestCMHello: the connection manager's hello carries what the TCP one
// does and is checked alike; a version-3 peer's 16 bytes are refused with
// an error naming both versions, not taken for a malformed hello.
func TestCMHello(t *testing.T) {
	h, err := parseHello([]byte(validHello))
	if err != nil {
		t.Fatal(err)
	}
	b := h.marshalCM()
	got, err := unmarshalCMHello(append(b, make([]byte, 36)...)) // padded, as the transport does
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != h.Version || got.Window != h.Window || got.RecvDepth != h.RecvDepth || got.MsgSize != h.MsgSize ||
		got.MTU != h.MTU || got.MaxRdAtomic != h.MaxRdAtomic || got.MaxDestRdAtomic != h.MaxDestRdAtomic {
		t.Errorf("%+v read back as %+v", h, got)
	}
	v3 := []byte("VRTH\x00\x03\x00\x03\x00\x00\x00\x40\x00\x00\x10\x00")
	if _, err := unmarshalCMHello(append(v3, make([]byte, 40)...)); !errors.Is(err, ErrProtocol) ||
		!strings.Contains(err.Error(), "version 3, this runtime speaks version 4") || !strings.Contains(err.Error(), "older") {
		t.Errorf("a version-3 hello: %v, want ErrProtocol naming versions 3 and 4 and the older side", err)
	}
	for _, c := range []struct {
		at    int
		value byte
		field string
	}{{16, 0x05, "mtu"}, {17, 0x01, "mtu"}, {18, 0, "max_rd_atomic"}, {18, 17, "max_rd_atomic"}, {19, 0, "max_dest_rd_atomic"}} {
		bad := h.marshalCM()
		bad[c.at] = c.value
		if _, err := unmarshalCMHello(bad); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("byte %d = %d: %v, want ErrProtocol naming %s", c.at, c.value, err, c.field)
		}
	}
	if _, err := unmarshalCMHello(b[:cmHelloLen-1]); !errors.Is(err, ErrProtocol) {
		t.Errorf("a hello cut short: %v, want ErrProtocol", err)
	}
}

// TestNegotiate: the path MTU is the smaller of the two ports', this
// side's read/atomic depth as initiator the smaller of its own and the
// peer's as responder (its depth as responder stays its own), and an
// InfiniBand peer on the same subnet is addressed by LID.
func TestNegotiate(t *testing.T) {
	own := verbs.ConnectSpec{PathMTU: verbs.MTU4096, MaxRdAtomic: 16, MaxDestRdAtomic: 8}
	ib := func(prefix byte) verbs.GID { return verbs.GID{0xfe, 0x80, 7: prefix, 15: 1} }
	for _, c := range []struct {
		ll               verbs.LinkLayer
		peerGID          verbs.GID
		mtu, rd, dest    int
		wantMTU          verbs.MTU
		wantRd, wantDest uint8
		wantByLID        bool
	}{
		{verbs.LinkLayerEthernet, ib(0), 1024, 16, 4, verbs.MTU1024, 4, 8, false},
		{verbs.LinkLayerEthernet, ib(0), 4096, 1, 16, verbs.MTU4096, 16, 8, false},
		{verbs.LinkLayerInfiniBand, ib(0), 2048, 16, 16, verbs.MTU2048, 16, 8, true},
		{verbs.LinkLayerInfiniBand, ib(1), 256, 16, 2, verbs.MTU256, 2, 8, false},
	} {
		peer := hello{MTU: c.mtu, MaxRdAtomic: c.rd, MaxDestRdAtomic: c.dest, gid: c.peerGID}
		s := negotiate(own, c.ll, ib(0), peer)
		if s.PathMTU != c.wantMTU || s.MaxRdAtomic != c.wantRd || s.MaxDestRdAtomic != c.wantDest || s.ByLID != c.wantByLID {
			t.Errorf("%s, peer %+v: mtu %s, max_rd_atomic %d, max_dest_rd_atomic %d, by LID %v; want %s, %d, %d, %v",
				c.ll, peer, s.PathMTU, s.MaxRdAtomic, s.MaxDestRdAtomic, s.ByLID, c.wantMTU, c.wantRd, c.wantDest, c.wantByLID)
		}
	}
}

// TestSameTransport: a peer's hello naming another transport than this
// side's is refused with ErrProtocol naming both providers; one naming
// the same, or none (an earlier build's), passes.
func TestSameTransport(t *testing.T) {
	for _, c := range []struct {
		provider, transport string
		peer                hello
		want                string // "" for no error
	}{
		{"rocev2", transportRoCE, hello{}, ""},
		{"rocev2", transportRoCE, hello{Provider: "ibv", Transport: transportRoCE}, ""},
		{"ibv", transportIB, hello{Provider: "ibv", Transport: transportIB}, ""},
		{"rocev2", transportRoCE, hello{Provider: "soft", Transport: transportSoft}, "the peer runs provider soft (an in-process fabric), this runtime rocev2 (RoCE v2)"},
		{"ibv", transportIB, hello{Provider: "ibv", Transport: transportRoCE}, "the peer runs provider ibv (RoCE v2), this runtime ibv (InfiniBand)"},
		{"soft", transportSoft, hello{Provider: "next", Transport: "warp"}, "the peer runs provider next (transport warp), this runtime soft"},
	} {
		err := sameTransport(c.provider, c.transport, c.peer)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s against %+v: %v", c.transport, c.peer, err)
		case c.want != "" && (!errors.Is(err, ErrProtocol) || err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s against %+v: %v, want ErrProtocol saying %q", c.transport, c.peer, err, c.want)
		}
	}
	for _, c := range []struct {
		provider string
		ll       verbs.LinkLayer
		want     string
	}{
		{"soft", verbs.LinkLayerEthernet, transportSoft},
		{"rocev2", verbs.LinkLayerEthernet, transportRoCE},
		{"ibv", verbs.LinkLayerEthernet, transportRoCE},
		{"ibv", verbs.LinkLayerInfiniBand, transportIB},
	} {
		if got := transportOf(c.provider, c.ll); got != c.want {
			t.Errorf("transportOf(%s, %v) = %s, want %s", c.provider, c.ll, got, c.want)
		}
	}
}

package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
)

// validHello is a hello this runtime takes, as a line of the handshake.
const validHello = `{"version":3,"qpn":17,"psn":0,"lid":0,"gid":"::ffff:10.77.0.1","recv_depth":64,"window":3,"msg_size":4096}` + "\n"

// TestParseHelloRefusesEveryFieldOutOfRange: each field of the peer's
// hello beyond what the runtime can honour is refused with ErrProtocol,
// and the error names the field.
func TestParseHelloRefusesEveryFieldOutOfRange(t *testing.T) {
	if _, err := parseHello([]byte(validHello)); err != nil {
		t.Fatalf("a valid hello: %v", err)
	}
	for _, c := range []struct{ replace, with, field string }{
		{`"version":3`, `"version":99`, "version"},
		{`"version":3`, `"version":0`, "version"},
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
	f.Add([]byte(`{"version":3,"qpn":16777215,"psn":16777215,"lid":65535,"gid":"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff","recv_depth":65536,"window":65536,"msg_size":1073741824}`))
	f.Add([]byte(`{"version":3,"qpn":4294967295,"psn":0,"gid":"::1","recv_depth":64,"window":3,"msg_size":4611686018427387904}`))
	f.Add([]byte(`{"version":3,"error":"verbsrt: out of registered memory","cause":"no_memory"}`))
	f.Add([]byte(`{"version":3,"qpn":17,"gid":"1.2.3.4","recv_depth":3,"window":3,"msg_size":1,"extra":[1,2,{}]}`))
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

package perftest

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
)

// The keys messages as perftest's sprintf of KEY_PRINT_FMT and
// KEY_PRINT_FMT_GID writes them (src/perftest_communication.h): the text,
// its NUL and zeros to KEY_MSG_SIZE (59) or KEY_MSG_SIZE_GID (108).
var keysCases = []struct {
	name    string
	d       Dest
	withGID bool
	text    string
}{
	{"no GID", Dest{LID: 0x1b, OutReads: 1, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1234, VAddr: 0x7f3a5c001000},
		false, "001b:0001:000011:abcdef:00001234:00007f3a5c001000:00000000"},
	{"RoCE v2 GID", Dest{LID: 0x12b7, OutReads: 0x80, QPN: 0xffffff, PSN: 0x1, RKey: 0xdeadbeef, VAddr: 0x55d0c0de0000,
		GID: verbs.GID{0xfd, 0x00, 15: 0x02}},
		true, "12b7:0080:ffffff:000001:deadbeef:000055d0c0de0000:fd:00:00:00:00:00:00:00:00:00:00:00:00:00:00:02:00000000:"},
	{"IPv4-mapped GID", Dest{QPN: 0x12, PSN: 0x345678, RKey: 0x5, VAddr: 0x1,
		GID: verbs.GID{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: 0, 15: 2}},
		true, "0000:0000:000012:345678:00000005:0000000000000001:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:02:00000000:"},
}

func TestPtKeysWire(t *testing.T) {
	for _, tc := range keysCases {
		want := make([]byte, keysSize(tc.withGID))
		copy(want, tc.text)
		if len(tc.text) != len(want)-1 {
			t.Fatalf("%s: the text is %d bytes, perftest's message %d with its NUL", tc.name, len(tc.text), len(want))
		}
		if got := tc.d.marshal(tc.withGID); !bytes.Equal(got, want) {
			t.Errorf("%s: marshal =\n %q, want\n %q", tc.name, got, want)
		}
		got, err := parseDest(want, tc.withGID)
		if err != nil || got != tc.d {
			t.Errorf("%s: parse = %+v, %v; want %+v", tc.name, got, err, tc.d)
		}
	}
}

func TestPtKeysRefused(t *testing.T) {
	pad := func(s string, n int) []byte { b := make([]byte, n); copy(b, s); return b }
	for _, tc := range []struct {
		msg     []byte
		withGID bool
	}{
		{pad("001b:0001:000011", 59), false},                                              // fields missing
		{pad("001b:0001:000011:abcdef:00001234:00007f3a5c001000:zz", 59), false},          // not hex
		{pad("10000:0001:000011:abcdef:00001234:00007f3a5c001000:00000000", 59), false},   // LID > 16 bits
		{pad("0001:0001:1000000:abcdef:00001234:00007f3a5c001000:00000000", 59), false},   // QPN > 24 bits
		{pad(keysCases[0].text, 108), true},                                               // no GID where one is due
		{pad(strings.Replace(keysCases[1].text, ":02:", ":102:", 1), 108), true},          // GID byte > 0xff
		{pad(strings.TrimSuffix(keysCases[1].text, "00000000:")+"100000000:", 108), true}, // SRQN > 32 bits
	} {
		if d, err := parseDest(tc.msg, tc.withGID); err == nil {
			t.Errorf("parseDest(%q) = %+v, accepted", tc.msg, d)
		}
	}
}

// FuzzKeys: whatever a peer sends, parsing fails or gives keys that
// format back to a message that parses to the same keys.
func FuzzKeys(f *testing.F) {
	for _, tc := range keysCases {
		f.Add([]byte(tc.text), tc.withGID)
	}
	f.Fuzz(func(t *testing.T, msg []byte, withGID bool) {
		d, err := parseDest(msg, withGID)
		if err != nil {
			return
		}
		again, err := parseDest(d.marshal(withGID), withGID)
		if err != nil || again != d {
			t.Errorf("%q parsed to %+v, which formats to one that parses to %+v, %v", msg, d, again, err)
		}
	})
}

func TestPtAtof(t *testing.T) {
	for s, want := range map[string]float64{"6.06": 6.06, "5.70": 5.7, "5.3": 5.3, "6": 6, "6.06.1": 6.06, "": 0, "x": 0, "5.": 5} {
		if got := atof(s); got != want {
			t.Errorf("atof(%q) = %v, want %v", s, got, want)
		}
	}
}

// cPeer is the C program's end of the exchanges, written from
// perftest_communication.c: it reads and writes the byte strings a C
// server (or client) would, and fails the test on any other.
type cPeer struct {
	t      *testing.T
	c      net.Conn
	client bool
}

// xchg is ctx_xchg_data_ethernet with fixed bytes: the C client writes
// first, the server reads first; the bytes read must be want.
func (p cPeer) xchg(send, want []byte) {
	p.t.Helper()
	if p.client {
		p.write(send)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(p.c, got); err != nil {
		p.t.Errorf("C peer: read %d bytes: %v", len(want), err)
		return
	}
	if want != nil && !bytes.Equal(got, want) {
		p.t.Errorf("C peer read %q, want %q", got, want)
	}
	if !p.client {
		p.write(send)
	}
}

func (p cPeer) write(b []byte) {
	if _, err := p.c.Write(b); err != nil {
		p.t.Errorf("C peer: write: %v", err)
	}
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// TestPtExchangeWithC walks one end of this package's protocol through a
// whole bandwidth test against the byte strings of a C peer of either
// role: versions, sys data, MTU, the keys four times, the reports, the
// close and "done".
func TestPtExchangeWithC(t *testing.T) {
	for _, goClient := range []bool{true, false} {
		name := map[bool]string{true: "Go client, C server", false: "Go server, C client"}[goClient]
		t.Run(name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			goEnd := &Conn{c: a, client: goClient}
			c := cPeer{t: t, c: b, client: !goClient}
			goKeys := keysCases[1].d
			cKeys := Dest{LID: 0, OutReads: 0x80, QPN: 0x21, PSN: 0x654321, RKey: 0x77, VAddr: 0x5000,
				GID: verbs.GID{0xfd, 0x00, 15: 0x01}}
			mine := Report{Size: 64, Iters: 1000, BWPeak: 1.5, BWAvg: 1.25, MsgAvg: 0.02}
			cReport := Report{Size: 4096, Iters: 999, BWPeak: 3, BWAvg: 2.5, MsgAvg: 0.04}
			done := make(chan struct{})
			go func() {
				defer close(done)
				version := make([]byte, versionSize)
				copy(version, "6.06")
				wantVersion := make([]byte, versionSize)
				copy(wantVersion, "6.06\x00verbsrt")
				c.xchg(version, wantVersion)
				// The C end's page is 16 KiB and its cache line 128: each
				// end takes the larger.
				c.xchg(be32(16384), be32(4096))
				c.xchg(be32(128), be32(64))
				// MTU: IBV_MTU_1024 (3) here, IBV_MTU_4096 (5) there.
				c.xchg([]byte("3\x00"), []byte("5\x00"))
				for range 4 {
					c.xchg(cKeys.marshal(true), goKeys.marshal(true))
				}
				var rep []byte
				for _, v := range []uint64{cReport.Size, cReport.Iters, math.Float64bits(cReport.BWPeak),
					math.Float64bits(cReport.BWAvg), math.Float64bits(cReport.MsgAvg)} {
					rep = append(rep, be64(v)...)
				}
				for i, v := range []uint64{mine.Size, mine.Iters, math.Float64bits(mine.BWPeak), math.Float64bits(mine.BWAvg), math.Float64bits(mine.MsgAvg)} {
					c.xchg(rep[i*8:i*8+8], be64(v))
				}
				c.xchg(cKeys.marshal(true), goKeys.marshal(true))
				got := make([]byte, 5)
				if _, err := io.ReadFull(b, got); err != nil || string(got) != "done\x00" {
					t.Errorf("C peer: after the last keys %q, %v; want \"done\\x00\"", got, err)
				}
			}()
			h, err := goEnd.Hello(4096, 64, verbs.MTU4096)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Hello{PeerVersion: "6.06", CycleBuffer: 16384, CacheLine: 128, MTU: verbs.MTU1024}); h != want {
				t.Errorf("hello = %+v, want %+v", h, want)
			}
			for range 4 {
				rem, err := goEnd.Handshake(goKeys, true)
				if err != nil || rem != cKeys {
					t.Fatalf("handshake = %+v, %v; want %+v", rem, err, cKeys)
				}
			}
			rep, err := goEnd.Reports(mine)
			if err != nil || rep != cReport {
				t.Errorf("reports = %+v, %v; want %+v", rep, err, cReport)
			}
			if err := goEnd.Close(goKeys, true); err != nil {
				t.Error(err)
			}
			<-done
		})
	}
}

// TestPtHelloRefusesOldPeer: a peer older than 5.70 is refused after the
// versions, as perftest 6.06 refuses it, before any other exchange.
func TestPtHelloRefusesOldPeer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		old := make([]byte, versionSize)
		copy(old, "5.60")
		io.ReadFull(b, make([]byte, versionSize))
		b.Write(old)
	}()
	_, err := (&Conn{c: a, client: true}).Hello(4096, 64, verbs.MTU1024)
	if err == nil || !strings.Contains(err.Error(), "5.60") {
		t.Errorf("hello with a 5.60 peer: %v", err)
	}
}

// TestPtHelloVerbsrtPeer: two ends of this package know each other by
// the mark after the version's NUL, and agree on every value.
func TestPtHelloVerbsrtPeer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	srv := make(chan Hello, 1)
	go func() {
		h, err := (&Conn{c: b}).Hello(4096, 64, verbs.MTU2048)
		if err != nil {
			t.Error(err)
		}
		srv <- h
	}()
	h, err := (&Conn{c: a, client: true}).Hello(8192, 64, verbs.MTU4096)
	if err != nil {
		t.Fatal(err)
	}
	want := Hello{PeerVersion: Version, Verbsrt: true, CycleBuffer: 8192, CacheLine: 64, MTU: verbs.MTU2048}
	if s := <-srv; h != want || s != want {
		t.Errorf("client's hello %+v, server's %+v; want both %+v", h, s, want)
	}
}

func TestPtV4Mapped(t *testing.T) {
	if !V4Mapped(keysCases[2].d.GID) || V4Mapped(keysCases[1].d.GID) || V4Mapped(verbs.GID{}) {
		t.Error("V4Mapped: wrong for ::ffff:198.18.0.2, fd00::2 or ::")
	}
}

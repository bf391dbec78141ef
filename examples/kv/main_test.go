package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// TestMain fails the package when a goroutine outlives the tests: run must
// leave nothing behind once it returns, on success and on error.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

func TestRun(t *testing.T) {
	for _, args := range [][]string{
		{"-clients", "4", "-rounds", "20", "-slots", "64", "-hot", "4"},
		{"-clients", "2", "-rounds", "10", "-slots", "8", "-slotsize", "256", "-batch", "8", "-updates", "8", "-hot", "1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, args, &out); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			for _, re := range []string{
				`(?m)^kv: \d+ slots x \d+ bytes \(rkey 0x[0-9a-f]+\), \d+ clients x \d+ rounds of \d+ reads and \d+ updates$`,
				`(?m)^reads: +\d+: \d+ consistent, \d+ locked or torn \(skipped\)$`,
				`(?m)^updates: (\d+) committed \(CAS won\), (\d+) published \(Then\), \d+ CAS lost to contention, \d+ given up$`,
				`(?m)^verify: +\d+ slots consistent, sum of counters (\d+) = committed updates (\d+): OK$`,
			} {
				if !regexp.MustCompile(re).MatchString(out.String()) {
					t.Errorf("output does not match %s:\n%s", re, out.String())
				}
			}
			m := regexp.MustCompile(`(?m)^updates: (\d+) committed`).FindStringSubmatch(out.String())
			if m == nil || m[1] == "0" {
				t.Errorf("no update committed:\n%s", out.String())
			}
		})
	}
}

func TestRunBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{"-clients", "0"},
		{"-slotsize", "60"},
		{"-slotsize", "16"},
		{"-updates", "17"},
		{"-hot", "0"},
		{"-slots", "8", "-hot", "9"},
		{"-slots", "1000000"},
		{"extra"},
	} {
		if err := run(context.Background(), args, new(bytes.Buffer)); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

// TestCloseRevokes checks that closing the store takes the region back
// from a connected client: its next READ fails at the server's device with
// REM_ACCESS_ERR, which ends its connection.
func TestCloseRevokes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fabric := soft.New(soft.Config{Devices: 2})
	defer fabric.Close()
	var rts []*runtime.Runtime
	for _, dev := range []string{"soft0", "soft1"} {
		rt, err := runtime.New(runtime.WithProvider(fabric), runtime.WithDevice(dev))
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close(context.Background())
		rts = append(rts, rt)
	}
	srt, crt := rts[0], rts[1]
	st, err := newStore(srt, 8, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{clients: 1, batch: 1, hot: 1}
	clients, err := connect(ctx, srt, crt, st.info(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := clients[0]
	read := func() error {
		_, err := c.ep.Read(ctx, c.buf.Slice(0, 64), c.info.slot(5)).Wait(ctx)
		return err
	}
	if err := read(); err != nil {
		t.Fatalf("READ of an exposed slot: %v", err)
	}
	if _, _, err := checkSlot(c.buf.Bytes()[:64], 5); err != nil {
		t.Fatalf("the slot read: %v", err)
	}
	if err := st.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	err = read()
	var wce *verbs.WCError
	if !errors.Is(err, verbs.ErrRemoteAccess) || !errors.As(err, &wce) || wce.Status != verbs.WCRemAccessErr {
		t.Fatalf("READ after the store closed: %v, want REM_ACCESS_ERR", err)
	}
	if !errors.Is(c.ep.Err(), runtime.ErrConnFailed) {
		t.Fatalf("the client's endpoint after REM_ACCESS_ERR: %v, want ErrConnFailed", c.ep.Err())
	}
}

// TestVerify checks that the server's final check catches every kind of
// damage an update could leave behind.
func TestVerify(t *testing.T) {
	rt, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	st, err := newStore(rt, 8, 64)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(slot int, counter uint64) {
		s := st.slotBytes(slot)
		ne.PutUint64(s[offVersion:], 2*counter)
		putValue(s, slot, 2*counter, counter)
	}
	for _, tc := range []struct {
		name   string
		damage func(s []byte)
		err    string
	}{
		{"none", func([]byte) {}, ""},
		{"locked", func(s []byte) { ne.PutUint64(s[offVersion:], 7) }, "slot 3: still locked at version 7"},
		{"lost write", func(s []byte) { putValue(s, 3, 4, 2) }, "slot 3: stamp 4, want 6"},
		{"lost publish", func(s []byte) { ne.PutUint64(s[offVersion:], 4) }, "slot 3: stamp 6, want 4"},
		{"counter", func(s []byte) { ne.PutUint64(s[offCounter:], 4) }, "slot 3: counter 4 at version 6, want 3"},
		{"fill", func(s []byte) { s[40] ^= 0x10 }, "slot 3: fill byte 40"},
		{"another slot's value", func(s []byte) { putValue(s, 2, 6, 3) }, "slot 3: fill byte 24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			commit(1, 5)
			commit(3, 3)
			tc.damage(st.slotBytes(3))
			sum, err := st.verify()
			switch {
			case tc.err == "" && (err != nil || sum != 8):
				t.Errorf("verify = %d, %v; want 8, nil", sum, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("verify error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestRegionInfo(t *testing.T) {
	good := regionInfo{Ref: runtime.RemoteRef{Addr: 0x7f0000001000, RKey: 0x1234, Len: 64 << 10}, Slots: 1024, SlotSize: 64}
	b, err := good.AppendBinary(nil)
	if err != nil || len(b) != infoLen {
		t.Fatalf("AppendBinary: %d bytes, %v", len(b), err)
	}
	var got regionInfo
	if err := got.UnmarshalBinary(b); err != nil || got != good {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []regionInfo{
		{Ref: good.Ref, Slots: 0, SlotSize: 64},
		{Ref: good.Ref, Slots: 1024, SlotSize: 60},
		{Ref: good.Ref, Slots: 1024, SlotSize: 24},
		{Ref: good.Ref, Slots: 1025, SlotSize: 64},
		{Ref: runtime.RemoteRef{Addr: 0x1004, RKey: 1, Len: 4096}, Slots: 1, SlotSize: 64},
	} {
		b, _ := bad.AppendBinary(nil)
		if err := got.UnmarshalBinary(b); err == nil {
			t.Errorf("UnmarshalBinary accepted %+v", bad)
		}
	}
	if err := got.UnmarshalBinary(b[:infoLen-1]); err == nil {
		t.Error("UnmarshalBinary accepted a short message")
	}
}

func FuzzRegionInfo(f *testing.F) {
	b, _ := regionInfo{Ref: runtime.RemoteRef{Addr: 4096, RKey: 7, Len: 4096}, Slots: 64, SlotSize: 64}.AppendBinary(nil)
	f.Add(b)
	f.Add([]byte("kv01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ri regionInfo
		if ri.UnmarshalBinary(b) != nil {
			return
		}
		if err := ri.validate(); err != nil {
			t.Fatalf("accepted an invalid %+v: %v", ri, err)
		}
		again, _ := ri.AppendBinary(nil)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding %+v gives %x, not %x", ri, again, b)
		}
	})
}

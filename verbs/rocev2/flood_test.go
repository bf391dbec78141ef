package rocev2_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
)

// floodEnv makes this test binary the flooder of TestFloodLeavesTheStream
// (its value: target address, QPN, PSN and count); floodCountEnv sets how
// many datagrams the flood sends (20,000 by default).
const (
	floodEnv      = "VERBSRT_ROCEV2_FLOODER"
	floodCountEnv = "VERBSRT_ROCEV2_FLOOD"
)

// TestFloodLeavesTheStream floods the server's socket of a runtime pair
// over rocev2, from another process, with datagrams half junk and half
// RoCE v2 packets with valid ICRCs for the flooder's address (random
// opcodes and headers, at the server's QPN and PSNs about the one it
// expects, or at random QPNs), while the client WRITEs, READs back and
// SENDs: every operation completes with its data checked, every message
// arrives once and in order, and the endpoints stay up. It logs what the
// transport dropped and this process's CPU time per dropped datagram, the
// stream's and the socket reads' included (BenchmarkDropStranger is the
// transport's own part).
func TestFloodLeavesTheStream(t *testing.T) {
	if v := os.Getenv(floodEnv); v != "" {
		os.Exit(flood(v))
	}
	count := 20000
	if v := os.Getenv(floodCountEnv); v != "" {
		var err error
		if count, err = strconv.Atoi(v); err != nil || count <= 0 {
			t.Fatalf("%s=%q: want a count", floodCountEnv, v)
		}
	}
	p := newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a way out, not a measurement
	defer cancel()
	client, server := newDeviceRuntime(t, p, "rocev2_0"), newDeviceRuntime(t, p, "rocev2_1")
	cli, srv := pipe(t, ctx, client, server)
	const slot = 4096
	target, err := server.Alloc(64 * slot)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := target.Expose(runtime.RemoteWrite | runtime.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	src, err := client.Alloc(2 * slot)
	if err != nil {
		t.Fatal(err)
	}

	qpn := srv.LocalAddr().(runtime.Addr).QPN
	psn, _ := p.ExpectedPSN(1, qpn)
	tr := p.Transport(1)
	before := tr.Stats()
	cpu0 := processCPU()
	flooder := startChild(t, "TestFloodLeavesTheStream", fmt.Sprintf("%s=%s,%d,%d,%d", floodEnv, tr.LocalAddr(), qpn, psn, count), time.Minute)

	ops := 0
	for flooding := true; flooding || ops < 8; ops++ {
		select {
		case err := <-flooder.exited:
			if err != nil {
				t.Fatalf("flooder: %v\n%s", err, flooder.stderr.Bytes())
			}
			flooder.exited <- nil // for the cleanup
			flooding = false
		default:
		}
		off := (ops % 64) * slot
		w := src.Bytes()[:slot]
		for i := range w {
			w[i] = byte(ops + i*13)
		}
		if _, err := cli.Write(ctx, src.Slice(0, slot), exp.RemoteRef().Slice(off, slot)).Wait(ctx); err != nil {
			t.Fatalf("WRITE %d during the flood: %v", ops, err)
		}
		if _, err := cli.Read(ctx, src.Slice(slot, slot), exp.RemoteRef().Slice(off, slot)).Wait(ctx); err != nil {
			t.Fatalf("READ %d during the flood: %v", ops, err)
		}
		if !bytes.Equal(src.Bytes()[slot:2*slot], w) {
			t.Fatalf("READ %d brought other bytes than WRITE %d wrote", ops, ops)
		}
		msg := []byte("message " + strconv.Itoa(ops))
		if _, err := cli.SendBytes(ctx, msg).Wait(ctx); err != nil {
			t.Fatalf("SEND %d during the flood: %v", ops, err)
		}
		m, err := srv.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv %d during the flood: %v", ops, err)
		}
		if !bytes.Equal(m.Bytes(), msg) {
			t.Fatalf("Recv %d got %q, want %q", ops, m.Bytes(), msg)
		}
		m.Release()
	}
	cpu := processCPU() - cpu0
	for _, ep := range []*runtime.Endpoint{cli, srv} {
		select {
		case <-ep.Done():
			t.Fatalf("an endpoint ended during the flood: %v", ep.Err())
		default:
		}
	}
	after := tr.Stats()
	drops := (after.Runt + after.NoQP + after.NotPeer + after.BadICRC + after.Malformed) -
		(before.Runt + before.NoQP + before.NotPeer + before.BadICRC + before.Malformed)
	t.Logf("%d datagrams sent, %d dropped (runt %d, no QP %d, not the peer %d, bad ICRC %d, malformed %d), %d rounds of WRITE, READ and SEND; this process's CPU %v (the stream's included), %v per dropped datagram",
		count, drops, after.Runt-before.Runt, after.NoQP-before.NoQP, after.NotPeer-before.NotPeer,
		after.BadICRC-before.BadICRC, after.Malformed-before.Malformed, ops, cpu, cpu/time.Duration(max(drops, 1)))
	if after.Received-before.Received == 0 {
		t.Fatal("the server's transport received nothing from its peer")
	}
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// flood is the flooder's process: spec is "addr,qpn,psn,count".
func flood(spec string) int {
	var addr string
	var qpn, psn uint32
	var count int
	for i, b := range []byte(spec) {
		if b == ',' {
			addr = spec[:i]
			fmt.Sscanf(spec[i+1:], "%d,%d,%d", &qpn, &psn, &count)
			break
		}
	}
	to, err := netip.ParseAddrPort(addr)
	if err != nil || count == 0 {
		fmt.Fprintf(os.Stderr, "flooder: bad spec %q: %v\n", spec, err)
		return 1
	}
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		fmt.Fprintf(os.Stderr, "flooder: %v\n", err)
		return 1
	}
	defer c.Close()
	from := c.LocalAddr().(*net.UDPAddr).AddrPort()
	h := wire.IPHeader{Src: from.Addr(), Dst: to.Addr(), SrcPort: from.Port(), DstPort: to.Port()}
	ops := []wire.Opcode{wire.RCSendOnly, wire.RCSendFirst, wire.RCSendLast, wire.RCWriteOnly, wire.RCWriteFirst,
		wire.RCReadRequest, wire.RCFetchAdd, wire.RCCompareSwap, wire.RCAcknowledge, wire.RCReadResponseOnly}
	r := rand.New(rand.NewPCG(uint64(qpn), uint64(psn)))
	junk := make([]byte, 1500)
	buf := make([]byte, 0, 2048)
	for i := range count {
		var b []byte
		if i%2 == 0 {
			b = junk[:r.IntN(len(junk))]
			for k := range b {
				b[k] = byte(r.Uint32())
			}
			if len(b) >= 8 && r.IntN(2) == 0 {
				binary.BigEndian.PutUint32(b[4:], qpn) // junk aimed at the QP
			}
		} else {
			dst := qpn
			if r.IntN(4) == 0 {
				dst = r.Uint32() & 0xffffff
			}
			pk := wire.Packet{BTH: wire.BTH{Opcode: ops[r.IntN(len(ops))], DestQP: dst, PKey: wire.DefaultPKey,
				PSN: wire.PSN(psn).Add(r.IntN(128) - 64), AckReq: true},
				RETH:      wire.RETH{VA: r.Uint64(), RKey: r.Uint32(), DMALen: uint32(r.IntN(1 << 20))},
				AtomicETH: wire.AtomicETH{VA: r.Uint64() &^ 7, RKey: r.Uint32(), SwapAdd: 1},
				AETH:      wire.AETH{Syndrome: wire.Syndrome(r.Uint32())}}
			if pk.BTH.Opcode.HasPayload() {
				pk.Payload = junk[:r.IntN(256)]
			}
			if b, err = pk.Append(buf[:0], &h); err != nil {
				continue
			}
		}
		c.WriteToUDPAddrPort(b, to) // ECONNREFUSED and a full buffer are the flood's business
	}
	return 0
}

package rocev2

import (
	"bytes"
	"github.com/verbsrt/verbsrt/verbs/rocev2/wire"
	"sync"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// slowLink joins a pair's requester A to its responder B through a link
// that delivers A's packets in order, one every per of the manual clock:
// a receiver that takes longer than the local ACK timeout to work through
// a window, as an emulated host or a loaded one does. B answers each
// packet it is handed at once, as rxe does (an ACK for each packet that
// asks for one and for each duplicate), and B's packets reach A at once.
// Both transports drop what they send and hand it to the link instead, so
// the exchange runs on the test's goroutine, in the clock's time only.
type slowLink struct {
	p   *pair
	per time.Duration

	mu    sync.Mutex // guards what the Hit functions append
	fromA []timedPacket
	fromB []wire.Packet

	queue []timedPacket // on the link: each packet and when B gets it
	free  time.Time     // when the link has delivered all it holds
	sentA int           // packets A sent
}

type timedPacket struct {
	at time.Time
	p  wire.Packet
}

func newSlowLink(p *pair, per time.Duration) *slowLink {
	l := &slowLink{p: p, per: per, free: p.clock.Now()}
	p.ta.Inject(Fault{Action: FaultDrop, Count: 1 << 30, Hit: func(pk wire.Packet) {
		now := p.clock.Now() // the Hit runs under A's lock, never the clock's
		l.mu.Lock()
		l.fromA = append(l.fromA, timedPacket{now, pk})
		l.sentA++
		l.mu.Unlock()
	}})
	p.tb.Inject(Fault{Action: FaultDrop, Count: 1 << 30, Hit: func(pk wire.Packet) {
		l.mu.Lock()
		l.fromB = append(l.fromB, pk)
		l.mu.Unlock()
	}})
	return l
}

// step moves what A and B sent since the last step on: B's packets to A,
// A's onto the link. It reports whether anything moved.
func (l *slowLink) step() bool {
	l.mu.Lock()
	fromA, fromB := l.fromA, l.fromB
	l.fromA, l.fromB = nil, nil
	l.mu.Unlock()
	for _, tp := range fromA {
		at := tp.at
		if l.free.After(at) {
			at = l.free
		}
		l.free = at.Add(l.per)
		l.queue = append(l.queue, timedPacket{l.free, tp.p})
	}
	for i := range fromB {
		l.p.a.Receive(l.p.tb.LocalAddr(), &fromB[i])
	}
	return len(fromA)+len(fromB) > 0
}

// run moves packets and time until done reports true, and fails the test
// if the link falls idle with no timer left, or the clock passes limit.
func (l *slowLink) run(t *testing.T, limit time.Duration, done func() bool) {
	t.Helper()
	end := l.p.clock.Now().Add(limit)
	for !done() {
		if l.step() {
			continue
		}
		now := l.p.clock.Now()
		if now.After(end) {
			t.Fatalf("not done after %v of the clock; %d packets on the link", limit, len(l.queue))
		}
		if len(l.queue) == 0 {
			if l.p.clock.Pending() == 0 {
				t.Fatal("nothing on the link and no timer armed")
			}
			l.p.clock.Advance(testTimeout)
			continue
		}
		// Timers due before the next delivery fire first; what they send
		// queues behind the link's packets.
		if d := l.queue[0].at.Sub(now); d > 0 {
			l.p.clock.Advance(d)
			l.step()
		}
		pk := l.queue[0].p
		l.queue = l.queue[1:]
		l.p.b.Receive(l.p.ta.LocalAddr(), &pk)
		l.p.b.Flush()
	}
}

// TestRCSlowReceiver sends 64 KiB messages one after another, as a
// ping-pong does, to a receiver that takes longer than the local ACK
// timeout to take in a window of packets, so the timeout fires while the
// packets are still on their way. Each message must complete, its data
// intact, within retry_cnt: the retransmissions a timeout causes must not
// pile up in front of the receiver faster than it works through them.
func TestRCSlowReceiver(t *testing.T) {
	const (
		mtu  = 1024
		size = 64 << 10 // 64 packets: the whole window
		msgs = 6
	)
	p := newPair(t, mtu, 7, 7)
	// 16 packets, an ACK's worth, take longer than the ACK timeout.
	per := testTimeout / 12
	l := newSlowLink(p, per)
	var recvs [][]byte
	for i := range msgs {
		recvs = append(recvs, p.postRecv(t, uint64(100+i), size))
	}
	for i := range msgs {
		msg := pattern(size, byte(i))
		p.post(t, &sendWQE{id: uint64(i + 1), op: verbs.OpSend, data: msg})
		var wc verbs.WC
		l.run(t, time.Hour, func() bool {
			select {
			case wc = <-p.wcA:
				return true
			default:
				return false
			}
		})
		if wc.WRID != uint64(i+1) || wc.Status != verbs.WCSuccess {
			t.Fatalf("message %d: completion %d %v after %d packets sent", i, wc.WRID, wc.Status, l.sentA)
		}
		expectWC(t, p.wcB, uint64(100+i), verbs.WCSuccess)
		if !bytes.Equal(recvs[i], msg) {
			t.Fatalf("message %d: data wrong", i)
		}
	}
	t.Logf("%d packets sent for %d messages of %d packets", l.sentA, msgs, size/mtu)
}

// TestRCCoalescedAck loses every ACK but the one for the last PSN of four
// WRITEs that fill the window: that one ACK completes all four, in order,
// with no timeout.
func TestRCCoalescedAck(t *testing.T) {
	const mtu, size = 1024, 16 << 10 // four WRITEs of 16 packets: 64, the window
	p := newPair(t, mtu, 7, 7)
	last := wire.PSN(0xfffffe).Add(4*size/mtu - 1)
	p.tb.Inject(Fault{Action: FaultDrop, Count: 1 << 30, Match: func(pk *wire.Packet) bool {
		return pk.BTH.Opcode == wire.RCAcknowledge && pk.BTH.PSN != last
	}})
	msg := pattern(4*size, 3)
	for i := range 4 {
		p.post(t, &sendWQE{id: uint64(i + 1), op: verbs.OpWrite, data: msg[i*size : (i+1)*size],
			raddr: vaB + uint64(i*size), rkey: rkeyB})
	}
	for i := range 4 {
		expectWC(t, p.wcA, uint64(i+1), verbs.WCSuccess)
	}
	if !bytes.Equal(p.readB(0, len(msg)), msg) {
		t.Fatal("data wrong")
	}
}

// TestRCRetryCountResets needs more timeouts than retry_cnt, each followed
// by progress: the count is of timeouts in a row without progress (IBA
// 9.7.5.1), so every WR completes.
func TestRCRetryCountResets(t *testing.T) {
	const retry = 1
	p := newPair(t, 256, retry, 7)
	start := wire.PSN(0xfffffe)
	for i := range 3 * retry {
		p.ta.Inject(Fault{Action: FaultDrop, Match: isPSN(start.Add(i)), Hit: p.hit})
	}
	for i := range 3 * retry {
		p.postRecv(t, uint64(100+i), 8)
		p.post(t, &sendWQE{id: uint64(i + 1), op: verbs.OpSend, data: []byte{byte(i)}})
		p.waitHit(t)
		noWC(t, p.wcA)
		p.clock.Advance(testTimeout)
		expectWC(t, p.wcA, uint64(i+1), verbs.WCSuccess)
		expectWC(t, p.wcB, uint64(100+i), verbs.WCSuccess)
	}
}

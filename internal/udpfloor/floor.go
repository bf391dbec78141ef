package udpfloor

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"
)

// Config is what a client runs; the server takes the tests and the window
// from it, test by test.
type Config struct {
	Tests []Test
	// Window is the most datagrams a stream keeps unacknowledged; 0:
	// DefaultWindow. The server acknowledges every half window.
	Window int
	// StallTimeout is how long a full window waits for an acknowledgment
	// before its datagrams are given up on as lost, and a round trip for
	// its echo; 0: DefaultStallTimeout.
	StallTimeout time.Duration
	// Addr is the address the client's UDP socket binds; the zero Addr:
	// ::1.
	Addr netip.Addr
}

func (cfg Config) window() int {
	if cfg.Window > 0 {
		return cfg.Window
	}
	return DefaultWindow
}

func (cfg Config) stall() time.Duration {
	if cfg.StallTimeout > 0 {
		return cfg.StallTimeout
	}
	return DefaultStallTimeout
}

// Result is one test's figures, both ends'.
type Result struct {
	Test
	Window    int    `json:"window"`    // stream: the window it ran with
	Datagrams uint64 `json:"datagrams"` // the client sent, echoes not included
	Received  uint64 `json:"received"`  // the server received
	Bytes     uint64 `json:"bytes"`     // payload bytes the server received
	Lost      uint64 `json:"lost"`      // datagrams sent that the server never got, or rr echoes that never came
	Stalls    uint64 `json:"stalls"`    // stream: full windows given up on after StallTimeout
	// Elapsed is the client's time from its first datagram to the last
	// acknowledgment or echo.
	Elapsed   time.Duration `json:"elapsed_ns"`
	ClientCPU time.Duration `json:"client_cpu_ns"` // user+sys over the test, getrusage
	ServerCPU time.Duration `json:"server_cpu_ns"`

	// Derived from the above (finish).
	MsgRateMpps      float64 `json:"msg_rate_mpps"`        // messages (rr: round trips) a second, millions
	MBps             float64 `json:"mb_per_s"`             // payload the server received, 2^20 bytes a second
	UsecPerOp        float64 `json:"usec_per_op"`          // Elapsed over Count: rr's round trip
	ClientCPUNsPerOp float64 `json:"client_cpu_ns_per_op"` // per message or round trip
	ServerCPUNsPerOp float64 `json:"server_cpu_ns_per_op"`
}

// finish fills the derived fields.
func (r *Result) finish() {
	if r.Elapsed <= 0 || r.Count <= 0 {
		return
	}
	sec := r.Elapsed.Seconds()
	r.MsgRateMpps = float64(r.Count) / sec / 1e6
	r.MBps = float64(r.Bytes) / sec / (1 << 20)
	r.UsecPerOp = float64(r.Elapsed.Microseconds()) / float64(r.Count)
	if r.ClientCPU >= 0 {
		r.ClientCPUNsPerOp = float64(r.ClientCPU) / float64(r.Count)
	}
	if r.ServerCPU >= 0 {
		r.ServerCPUNsPerOp = float64(r.ServerCPU) / float64(r.Count)
	}
}

// streamSend is the client's side of a stream: it sends t's datagrams to
// `to` in batches of t.Batch, never more than window unacknowledged, and
// waits for the acknowledgment of the last.
func (s *sock) streamSend(to netip.AddrPort, t Test, window int, stall time.Duration, r *Result) error {
	n, _ := chunks(t.Size)
	total := uint64(t.Count) * uint64(n)
	toAddr := net.UDPAddrFromAddrPort(to)
	var next, acked uint64 // the next datagram to send; all below acked are acknowledged
	for acked < total {
		if room := min(uint64(window)-(next-acked), total-next); room > 0 {
			k := int(min(room, uint64(t.Batch)))
			if err := s.send(to, toAddr, next, k, t.Size, t.Batch); err != nil {
				return err
			}
			next += uint64(k)
			r.Datagrams += uint64(k)
			if next-acked < uint64(window) && next < total {
				continue // room left: the acknowledgments wait in the socket
			}
		}
		high, err := s.readAcks(t.Batch, time.Now().Add(stall))
		switch {
		case isTimeout(err):
			r.Stalls++
			acked = next // lost on the way, either way: go on
		case err != nil:
			return err
		default:
			acked = max(acked, min(high, next))
		}
	}
	return nil
}

// streamRecv is the server's side of a stream: it reads t's datagrams in
// batches of t.Batch and acknowledges the highest it has seen every half
// window and on the last, until the last arrived or nothing came for
// idleTimeout.
func (s *sock) streamRecv(t Test, window int, r *Result) error {
	n, _ := chunks(t.Size)
	total := uint64(t.Count) * uint64(n)
	every := uint64(max(1, window/2))
	var since uint64
	var seen uint64 // one more than the highest datagram's number
	s.c.SetReadDeadline(time.Now().Add(idleTimeout))
	for seen < total {
		k, b, high, from, err := s.recv(t.Batch)
		if isTimeout(err) {
			return nil // the rest is lost
		}
		if err != nil {
			return err
		}
		r.Received += uint64(k)
		r.Bytes += uint64(b)
		seen = max(seen, high+1)
		if since += uint64(k); since >= every || seen == total {
			if err := s.sendAck(from, seen); err != nil {
				return err
			}
			since = 0
			s.c.SetReadDeadline(time.Now().Add(idleTimeout))
		}
	}
	return nil
}

// refreshEvery is how many round trips share one read deadline: a
// deadline per read would add a timer's cost to every round trip.
const refreshEvery = 64

// roundTrips is the client's side of rr: t.Count datagrams of t.Size
// bytes, each sent once its predecessor's echo came back (or did not
// within stall).
func (s *sock) roundTrips(to netip.AddrPort, t Test, stall time.Duration, r *Result) error {
	s.grow(2)
	b, in := s.bufs[0][:t.Size+Overhead], s.bufs[1]
	for i := range uint64(t.Count) {
		if i%refreshEvery == 0 {
			s.c.SetReadDeadline(time.Now().Add(max(stall, idleTimeout)))
		}
		binary.BigEndian.PutUint64(b, i)
		if _, err := s.c.WriteToUDPAddrPort(b, to); err != nil {
			return err
		}
		r.Datagrams++
		for {
			k, _, err := s.c.ReadFromUDPAddrPort(in)
			if isTimeout(err) {
				r.Lost++
				s.c.SetReadDeadline(time.Now().Add(max(stall, idleTimeout)))
				break
			}
			if err != nil {
				return err
			}
			if k >= 8 && binary.BigEndian.Uint64(in) == i {
				break // a late echo of an earlier one is read past
			}
		}
	}
	return nil
}

// echo is the server's side of rr: each datagram goes back to its source,
// t.Count of them, or until nothing came for idleTimeout.
func (s *sock) echo(t Test, r *Result) error {
	b := s.bufs[0]
	for i := range t.Count {
		if i%refreshEvery == 0 {
			s.c.SetReadDeadline(time.Now().Add(idleTimeout))
		}
		k, from, err := s.c.ReadFromUDPAddrPort(b)
		if isTimeout(err) {
			return nil
		}
		if err != nil {
			return err
		}
		r.Received++
		r.Bytes += uint64(max(0, k-Overhead))
		if _, err := s.c.WriteToUDPAddrPort(b[:k], from); err != nil {
			return err
		}
	}
	return nil
}

package udpfloor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/ipv6"
)

// ReadBuffer is the receive buffer each end asks its socket for, as the
// rocev2 transport does (rocev2.DefaultReadBuffer): room for a window of
// 4 KiB datagrams with the kernel's per-datagram charge on top.
const ReadBuffer = 4 << 20

// idleTimeout bounds a wait of the server for the client's next datagram
// once a test has begun: past it the test ends with what arrived.
const idleTimeout = 5 * time.Second

// minDatagram is the shortest datagram of a test: its number and the
// Overhead; an acknowledgment is shorter (8 bytes).
const minDatagram = 8 + Overhead

// sock is one end's UDP socket and the buffers of its batches. Not safe
// for concurrent use: one goroutine runs a test on it at a time.
type sock struct {
	c    *net.UDPConn
	pc   *ipv6.PacketConn // the same socket, for ReadBatch and WriteBatch
	bufs [][]byte         // a batch's datagrams, DefaultChunk+Overhead bytes each
	ms   []ipv6.Message   // a batch's messages, over bufs
	ack  []byte           // an acknowledgment, sent or received
	acks []ipv6.Message   // acknowledgments read at once
}

// listenUDP opens a socket on addr, a free port, with room for batches of
// up to maxBatch datagrams.
func listenUDP(addr netip.Addr, maxBatch int) (*sock, error) {
	if !addr.IsValid() {
		addr = netip.IPv6Loopback()
	}
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
	if err != nil {
		return nil, err
	}
	c.SetReadBuffer(ReadBuffer) // capped by net.core.rmem_max; best effort, as the provider's
	s := &sock{c: c, pc: ipv6.NewPacketConn(c), ack: make([]byte, 8)}
	s.grow(maxBatch)
	s.acks = make([]ipv6.Message, 8)
	for i := range s.acks {
		s.acks[i].Buffers = [][]byte{make([]byte, 64)}
	}
	return s, nil
}

// grow makes room for batches of n datagrams.
func (s *sock) grow(n int) {
	for len(s.bufs) < n {
		s.bufs = append(s.bufs, make([]byte, DefaultChunk+Overhead))
		s.ms = append(s.ms, ipv6.Message{Buffers: make([][]byte, 1)})
	}
}

func (s *sock) addr() netip.AddrPort { return s.c.LocalAddr().(*net.UDPAddr).AddrPort() }

func (s *sock) Close() error { return s.c.Close() }

// isTimeout reports whether err is a read deadline's.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// chunks returns how many datagrams carry a message of size bytes, and the
// payload of the last one.
func chunks(size int) (n, last int) {
	n = (size + DefaultChunk - 1) / DefaultChunk
	return n, size - (n-1)*DefaultChunk
}

// datagramLen returns the length of datagram seq of a stream of messages
// of size bytes: its share of the message's payload and the Overhead.
func datagramLen(seq uint64, size int) int {
	n, last := chunks(size)
	if int(seq%uint64(n)) == n-1 {
		return last + Overhead
	}
	return DefaultChunk + Overhead
}

// send writes datagrams first..first+n-1 of a stream of size-byte
// messages to `to`: one WriteTo when batch is 1, else WriteBatch calls
// until all n are written.
func (s *sock) send(to netip.AddrPort, toAddr *net.UDPAddr, first uint64, n, size, batch int) error {
	if batch == 1 {
		for i := range n {
			b := s.bufs[0][:datagramLen(first+uint64(i), size)]
			binary.BigEndian.PutUint64(b, first+uint64(i))
			if _, err := s.c.WriteToUDPAddrPort(b, to); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range n {
		b := s.bufs[i][:datagramLen(first+uint64(i), size)]
		binary.BigEndian.PutUint64(b, first+uint64(i))
		s.ms[i].Buffers[0] = b
		s.ms[i].Addr = toAddr
	}
	for done := 0; done < n; {
		k, err := s.pc.WriteBatch(s.ms[done:n], 0)
		if err != nil {
			return err
		}
		done += k
	}
	return nil
}

// recv reads what the socket holds, at least one datagram, at most batch
// (one ReadFrom when batch is 1, else one ReadBatch), and returns how
// many, their payload bytes, the highest number among them and the
// source of the first.
func (s *sock) recv(batch int) (n int, bytes int, high uint64, from netip.AddrPort, err error) {
	if batch == 1 {
		k, src, err := s.c.ReadFromUDPAddrPort(s.bufs[0])
		if err != nil {
			return 0, 0, 0, src, err
		}
		if k < minDatagram {
			return 0, 0, 0, src, fmt.Errorf("a datagram of %d bytes from %v: shorter than a stream's", k, src)
		}
		return 1, k - Overhead, binary.BigEndian.Uint64(s.bufs[0]), src, nil
	}
	for i := range batch {
		s.ms[i].Buffers[0] = s.bufs[i]
	}
	k, err := s.pc.ReadBatch(s.ms[:batch], 0)
	if err != nil {
		return 0, 0, 0, from, err
	}
	if ua, ok := s.ms[0].Addr.(*net.UDPAddr); ok {
		from = ua.AddrPort()
	}
	for i := range k {
		if s.ms[i].N < minDatagram {
			return 0, 0, 0, from, fmt.Errorf("a datagram of %d bytes from %v: shorter than a stream's", s.ms[i].N, s.ms[i].Addr)
		}
		high = max(high, binary.BigEndian.Uint64(s.bufs[i]))
		bytes += s.ms[i].N - Overhead
	}
	return k, bytes, high, from, nil
}

// sendAck tells `to` that every datagram up to next-1 arrived or is given
// up on.
func (s *sock) sendAck(to netip.AddrPort, next uint64) error {
	binary.BigEndian.PutUint64(s.ack, next)
	_, err := s.c.WriteToUDPAddrPort(s.ack, to)
	return err
}

// readAcks waits, at most until deadline, for acknowledgments and returns
// the highest they carry (one ReadFrom when batch is 1, else one ReadBatch
// of what is queued).
func (s *sock) readAcks(batch int, deadline time.Time) (uint64, error) {
	s.c.SetReadDeadline(deadline)
	if batch == 1 {
		k, _, err := s.c.ReadFromUDPAddrPort(s.acks[0].Buffers[0])
		if err != nil {
			return 0, err
		}
		if k != 8 {
			return 0, nil // not an acknowledgment
		}
		return binary.BigEndian.Uint64(s.acks[0].Buffers[0]), nil
	}
	k, err := s.pc.ReadBatch(s.acks, 0)
	if err != nil {
		return 0, err
	}
	var high uint64
	for i := range k {
		if s.acks[i].N == 8 {
			high = max(high, binary.BigEndian.Uint64(s.acks[i].Buffers[0]))
		}
	}
	return high, nil
}

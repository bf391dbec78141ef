package runtime_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
)

// TestLinkKeepsTheHandshakeConnection: after Dial and Accept the
// handshake's TCP connection stays open on both ends, past the deadline of
// the context that bounded the handshake, with TCP keepalive set so that a
// peer whose host stops answering is noticed within the documented bound
// (10 s: 5 s idle, then 5 probes a second apart), though nothing is sent.
func TestLinkKeepsTheHandshakeConnection(t *testing.T) {
	rt := newRuntime(t)
	// Long enough for a handshake on a busy machine; the test then waits
	// for it to pass.
	const handshakeDeadline = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), handshakeDeadline)
	defer cancel()
	cli, srv, err := runtime.Pipe(ctx, rt, rt)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.PeerSilenceBound != 10*time.Second {
		t.Errorf("the bound is %v; doc.go and Endpoint.Done say 10 s", runtime.PeerSilenceBound)
	}
	for _, ep := range []struct {
		name string
		ep   *runtime.Endpoint
	}{{"dialer", cli}, {"acceptor", srv}} {
		c, ok := runtime.LinkConnForTest(ep.ep).(*net.TCPConn)
		if !ok {
			t.Fatalf("%s: no TCP connection kept", ep.name)
		}
		raw, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var on, idle, interval, count int
		var errs [4]error
		err = raw.Control(func(fd uintptr) {
			on, errs[0] = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
			idle, errs[1] = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
			interval, errs[2] = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL)
			count, errs[3] = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT)
		})
		for _, e := range append(errs[:], err) {
			if e != nil {
				t.Fatalf("%s: getsockopt: %v", ep.name, e)
			}
		}
		bound := time.Duration(idle+count*interval) * time.Second
		if on == 0 || bound != runtime.PeerSilenceBound {
			t.Errorf("%s: keepalive %v, idle %d s, %d probes %d s apart (%v); want on, within %v",
				ep.name, on != 0, idle, count, interval, bound, runtime.PeerSilenceBound)
		}
	}
	// The handshake's deadline passes; the link must not end with it.
	<-ctx.Done()
	time.Sleep(200 * time.Millisecond)
	for _, ep := range []*runtime.Endpoint{cli, srv} {
		if err := ep.Err(); err != nil {
			t.Errorf("endpoint over after the handshake's deadline: %v", err)
		}
	}
}

package runtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// TestConnOfKilledPeer: a net.Conn (runtime/rdmanet) whose peer's process
// dies fails a blocked Read and the Writes after it with an error matching
// ErrPeerLost, within the endpoint's bound (killedNoticeBound): the conn
// ends as its endpoint does. It lives here for KillForTest.
func TestConnOfKilledPeer(t *testing.T) {
	rtA, rtB := twoHosts(t)
	a, b := connectRuntimes(t, rtA, rtB)
	conn := rdmanet.NewConn(a)
	defer conn.Close()
	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 64))
		readErr <- err
	}()
	if _, err := conn.Write(make([]byte, 10000)); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := runtime.KillForTest(b, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, runtime.ErrPeerLost) {
			t.Errorf("blocked Read: %v, want ErrPeerLost", err)
		}
		t.Logf("Read failed %v after the kill: %v", time.Since(killed).Round(time.Microsecond), err)
	case <-time.After(killedNoticeBound):
		t.Fatalf("Read still blocked %v after the peer was killed", killedNoticeBound)
	}
	if _, err := conn.Write(make([]byte, 10)); !errors.Is(err, runtime.ErrPeerLost) {
		t.Errorf("Write after the peer was lost: %v, want ErrPeerLost", err)
	}
}

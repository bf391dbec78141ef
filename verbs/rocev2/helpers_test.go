package rocev2_test

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// newDeviceRuntime returns a runtime on device dev of p, closed by the
// test's cleanup.
func newDeviceRuntime(t testing.TB, p *rocev2.Provider, dev string) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(runtime.WithProvider(p), runtime.WithDevice(dev))
	if err != nil {
		t.Fatalf("runtime.New on %s: %v", dev, err)
	}
	t.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("closing the runtime on %s: %v", dev, err)
		}
	})
	return rt
}

// newLoopbackRuntime returns a runtime over a rocev2 provider of its own
// on ::1, as a process of its own has.
func newLoopbackRuntime(t testing.TB) *runtime.Runtime {
	t.Helper()
	p, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{netip.IPv6Loopback()}})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	rt, err := runtime.New(runtime.WithProvider(p), runtime.WithMemoryLimit(512<<20))
	if err != nil {
		p.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("closing the runtime: %v", err)
		}
		p.Close()
	})
	return rt
}

// pipe connects client and server with runtime.Pipe, bounded by ctx; the
// test's cleanup closes the endpoints.
func pipe(t testing.TB, ctx context.Context, client, server *runtime.Runtime) (cli, srv *runtime.Endpoint) {
	t.Helper()
	cli, srv, err := runtime.Pipe(ctx, client, server)
	if err != nil {
		t.Fatalf("Pipe: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a way out
		defer cancel()
		cli.Close(ctx)
		srv.Close(ctx)
	})
	return cli, srv
}

// child is this test binary run again as another process, for the test
// named test, with env set: its stdin and stdout are pipes to the test.
type child struct {
	stdin  io.WriteCloser
	stdout io.Reader
	stderr bytes.Buffer
	exited chan error
}

// startChild starts the child; the test's cleanup closes its stdin and
// waits for it (killing it after wait), and fails the test if it failed.
func startChild(t *testing.T, test, env string, wait time.Duration) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env)
	c := &child{exited: make(chan error, 1)}
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if c.stdout, err = cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		c.stdin.Close()
		select {
		case err := <-c.exited:
			if err != nil {
				t.Errorf("%s's other process: %v\n%s", test, err, c.stderr.Bytes())
			}
		case <-time.After(wait):
			cmd.Process.Kill()
			<-c.exited
			t.Errorf("%s's other process did not exit\n%s", test, c.stderr.Bytes())
		}
	})
	return c
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTwoProcessesRoCEv2 builds verbsrt and runs each end of bench and of
// pingpong in a process of its own with -provider rocev2 on ::1: what a
// user of one machine without an RDMA NIC, rxe or root runs. Each server
// takes a free TCP port (-p 0) and each rocev2 device a free UDP port,
// which the handshakes announce.
func TestTwoProcessesRoCEv2(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback (::1), which the rocev2 provider binds: %v", err)
	} else {
		c.Close()
	}
	bin := buildVerbsrt(t)

	// SENDs through the runtime's Listen and Dial: the server counts the
	// messages and bytes that reached it and fails unless they are the
	// ones the client reports completed.
	t.Run("bench send", func(t *testing.T) {
		const n, size = 300, 3000 // three packets at the path MTU
		srv, cli := benchProcesses(t, bin, "send", "-n", fmt.Sprint(n), "-s", fmt.Sprint(size))
		checkBenchResult(t, cli, "send", n, size)
		want := fmt.Sprintf("the server received %d messages, %d bytes", n, n*size)
		if !strings.Contains(srv, want) {
			t.Errorf("the server's stderr lacks %q:\n%s", want, srv)
		}
	})
	// A ping-pong of SENDs through the runtime: each iteration is a
	// message received by the server and its reply received by the
	// client.
	t.Run("bench send pingpong", func(t *testing.T) {
		const n, size = 100, 64
		srv, cli := benchProcesses(t, bin, "send", "-lat", "-pingpong", "-n", fmt.Sprint(n), "-s", fmt.Sprint(size))
		checkBenchResult(t, cli, "send", n, size)
		if want := fmt.Sprintf("the server received %d messages, %d bytes", n, n*size); !strings.Contains(srv, want) {
			t.Errorf("the server's stderr lacks %q:\n%s", want, srv)
		}
	})
	// RDMA WRITEs into the server's exposed buffer: each completes once
	// the other process's device acknowledged it.
	t.Run("bench write", func(t *testing.T) {
		const n, size = 200, 8192
		_, cli := benchProcesses(t, bin, "write", "-n", fmt.Sprint(n), "-s", fmt.Sprint(size))
		checkBenchResult(t, cli, "write", n, size)
	})
	// ibv_rc_pingpong's protocol on the verbs directly, polling and
	// sleeping on CQ events, with -c: the client zeroes its buffer's first
	// byte of each page, the server's buffer starts as 0x7b, and the
	// server reports a page whose byte is not 0 once the run is over.
	for _, mode := range [][]string{nil, {"-e"}} {
		t.Run(strings.TrimSpace("pingpong "+strings.Join(mode, " ")), func(t *testing.T) {
			const n, size = 100, 5000 // two pages, five packets at -m 1024
			args := append([]string{"pingpong", "-provider", "rocev2", "-c", "-n", fmt.Sprint(n), "-s", fmt.Sprint(size)}, mode...)
			srvOut, _, cliOut := twoProcesses(t, bin, args, nil, `waiting for a client on \[::\]:(\d+)`)
			for name, out := range map[string]string{"server": srvOut, "client": cliOut} {
				for _, want := range []string{fmt.Sprintf("%d bytes in ", 2*n*size), fmt.Sprintf("%d iters in ", n), "GID ::1\n"} {
					if !strings.Contains(out, want) {
						t.Errorf("the %s's output lacks %q:\n%s", name, want, out)
					}
				}
				if strings.Contains(out, "invalid data") {
					t.Errorf("the %s received other bytes than its peer sent:\n%s", name, out)
				}
			}
		})
	}
}

// benchProcesses runs verbsrt bench's server and client with -provider
// rocev2 and the client's args, and returns the server's stderr and the
// client's stdout (JSON results).
func benchProcesses(t *testing.T, bin string, args ...string) (srvStderr, cliStdout string) {
	t.Helper()
	common := []string{"bench", "-provider", "rocev2", "-progress", "0"}
	_, srvErr, cliOut := twoProcesses(t, bin, append(common, "-server", "-p", "0"), append(append(common, "-json"), args...),
		`waiting for a client on \[::\]:(\d+)`)
	return srvErr, cliOut
}

// checkBenchResult checks the client's one JSON result: the test, the
// size and every iteration done, over rocev2.
func checkBenchResult(t *testing.T, out, test string, n, size int) {
	t.Helper()
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("the client's output is not one JSON result: %v\n%s", err, out)
	}
	if r.Test != test || r.Provider != "rocev2" || r.Bytes != size || r.Iterations != uint64(n) {
		t.Errorf("the client's result %+v: want %s over rocev2, %d iterations of %d bytes", r, test, n, size)
	}
}

// twoProcesses starts bin with srvArgs, reads the TCP port it listens on
// from its stderr (portRE's group), runs bin with cliArgs (srvArgs
// without -p 0 when nil), then "-p PORT ::1", and returns the server's
// stdout and stderr and the client's stdout once both exited with 0.
func twoProcesses(t *testing.T, bin string, srvArgs, cliArgs []string, portRE string) (srvOut, srvErr, cliOut string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a way out, not a measurement
	defer cancel()
	if cliArgs == nil {
		cliArgs = srvArgs
		srvArgs = append(srvArgs[:len(srvArgs):len(srvArgs)], "-p", "0")
	}
	srv := exec.CommandContext(ctx, bin, srvArgs...)
	var sout bytes.Buffer
	srv.Stdout = &sout
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The server's stderr, whole, and the port once it says it.
	var serr bytes.Buffer
	port := make(chan string, 1)
	var read sync.WaitGroup
	read.Add(1)
	go func() {
		defer read.Done()
		defer close(port)
		re := regexp.MustCompile(portRE)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			serr.Write(append(sc.Bytes(), '\n'))
			if m := re.FindSubmatch(sc.Bytes()); m != nil {
				port <- string(m[1])
			}
		}
	}()
	serverDone := func() error {
		read.Wait() // all of stderr read, as Wait requires
		return srv.Wait()
	}
	p, ok := <-port
	if !ok {
		err := serverDone()
		t.Fatalf("the server %q said no port (%v):\n%s", srvArgs, err, serr.String())
	}
	cli := exec.CommandContext(ctx, bin, append(cliArgs, "-p", p, "::1")...)
	var cout, cerr bytes.Buffer
	cli.Stdout, cli.Stderr = &cout, &cerr
	cliRunErr := cli.Run()
	if cliRunErr != nil {
		cancel() // a server waiting for what never comes gives up
	}
	srvRunErr := serverDone()
	if cliRunErr != nil || srvRunErr != nil {
		t.Fatalf("client %q: %v\n%s%s\nserver %q: %v\n%s%s", cliArgs, cliRunErr, cout.String(), cerr.String(),
			srvArgs, srvRunErr, sout.String(), serr.String())
	}
	return sout.String(), serr.String(), cout.String()
}

// buildVerbsrt builds this command into a temporary directory.
func buildVerbsrt(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build verbsrt: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "verbsrt")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

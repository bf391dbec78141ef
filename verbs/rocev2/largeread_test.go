package rocev2_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// readPeerEnv makes this test binary the serving peer of
// TestLargeReadAcrossProcesses; readSizeEnv sets the READ's size in
// bytes for both tests of this file (for runs that measure more).
const (
	readPeerEnv = "VERBSRT_ROCEV2_READ_PEER"
	readSizeEnv = "VERBSRT_ROCEV2_READ_SIZE"
)

// largeReadSize is the READ's size: readSizeEnv's, or def.
func largeReadSize(t *testing.T, def int) int {
	if v := os.Getenv(readSizeEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a size in bytes", readSizeEnv, v)
		}
		return n
	}
	return def
}

// readPattern is what the serving side exposes: no two nearby 4 KiB
// pages alike, so a packet placed at the wrong offset shows.
func readPattern(b []byte) {
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
}

// readAll READs ref whole into a fresh buffer of rt over ep and checks
// the bytes.
func readAll(t *testing.T, ctx context.Context, rt *runtime.Runtime, ep *runtime.Endpoint, ref runtime.RemoteRef) {
	t.Helper()
	n := int(ref.Len)
	dst, err := rt.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Free()
	start := time.Now()
	c, err := ep.Read(ctx, dst.Slice(0, n), ref).Wait(ctx)
	if err != nil {
		t.Fatalf("READ of %d bytes: %v (after %v)", ref.Len, err, time.Since(start))
	}
	want := make([]byte, n)
	readPattern(want)
	if int(c.ByteLen) != n || !bytes.Equal(dst.Bytes(), want) {
		t.Fatalf("READ of %d bytes completed %d bytes, not the peer's", ref.Len, c.ByteLen)
	}
	t.Logf("READ of %d bytes in %v", ref.Len, time.Since(start))
}

// TestLargeReadInOneProcess READs 16 MiB between two runtimes of one
// process, each over a provider of its own: the requester asks for a
// window at a time, so the response never overruns the socket buffers,
// and the READ completes with the peer's bytes.
func TestLargeReadInOneProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a way out, not a measurement
	defer cancel()
	client, server := newLoopbackRuntime(t), newLoopbackRuntime(t)
	cli, _ := pipe(t, ctx, client, server)
	n := largeReadSize(t, 16<<20)
	src, err := server.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	readPattern(src.Bytes())
	exp, err := src.Expose(runtime.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	readAll(t, ctx, client, cli, exp.RemoteRef())
}

// readOffer is what the serving peer of TestLargeReadAcrossProcesses
// tells the parent: where to dial and what to READ.
type readOffer struct {
	Listen string
	Ref    []byte // runtime.RemoteRef.MarshalBinary
}

// TestLargeReadAcrossProcesses READs 64 MiB from a runtime in another
// process over RoCE v2 on ::1, as a new user's storage engine would
// fetch a large object: the READ completes with the peer's bytes.
func TestLargeReadAcrossProcesses(t *testing.T) {
	if os.Getenv(readPeerEnv) != "" {
		os.Exit(serveLargeRead(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a way out, not a measurement
	defer cancel()
	peer := startChild(t, "TestLargeReadAcrossProcesses", readPeerEnv+"=1", time.Minute)
	var offer readOffer
	if err := json.NewDecoder(peer.stdout).Decode(&offer); err != nil {
		t.Fatalf("reading the serving process's offer: %v\n%s", err, peer.stderr.Bytes())
	}
	var ref runtime.RemoteRef
	if err := ref.UnmarshalBinary(offer.Ref); err != nil {
		t.Fatal(err)
	}
	rt := newLoopbackRuntime(t)
	ep, err := rt.Dial(ctx, offer.Listen)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer ep.Close(ctx)
	readAll(t, ctx, rt, ep, ref)
}

// serveLargeRead is the serving process: it exposes readSizeEnv's bytes
// (64 MiB by default) of readPattern, offers them on stdout, accepts one
// endpoint and serves it until stdin closes.
func serveLargeRead(t *testing.T) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "serving peer: "+format+"\n", args...)
		return 1
	}
	ctx := context.Background()
	p, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{netip.IPv6Loopback()}})
	if err != nil {
		return fail("rocev2.New: %v", err)
	}
	defer p.Close()
	rt, err := runtime.New(runtime.WithProvider(p), runtime.WithMemoryLimit(512<<20))
	if err != nil {
		return fail("runtime.New: %v", err)
	}
	defer rt.Close(ctx)
	src, err := rt.Alloc(largeReadSize(t, 64<<20))
	if err != nil {
		return fail("Alloc: %v", err)
	}
	readPattern(src.Bytes())
	exp, err := src.Expose(runtime.RemoteRead)
	if err != nil {
		return fail("Expose: %v", err)
	}
	ln, err := rt.Listen("[::1]:0")
	if err != nil {
		return fail("Listen: %v", err)
	}
	ref, _ := exp.RemoteRef().MarshalBinary()
	if err := json.NewEncoder(os.Stdout).Encode(readOffer{Listen: ln.Addr().String(), Ref: ref}); err != nil {
		return fail("offer: %v", err)
	}
	ep, err := ln.Accept(ctx)
	if err != nil {
		return fail("Accept: %v", err)
	}
	bufio.NewReader(os.Stdin).ReadByte() // the parent closes stdin when it is done
	ep.Close(ctx)
	return 0
}

package rdmanet_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// The conformance suite no one here wrote (golang.org/x/net/nettest),
// gRPC and net/http run against Conns in the examples/rdmanet module, which
// may depend on them. The tests here are this package's own: the stream's
// bytes under random sizes and deadlines, half-close, flow control, Close,
// and what a careless user does.

// ants starts its default pool's goroutines at init: they are not the conns'.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// openRuntime opens a runtime on the soft provider, or with
// RDMANET_PROVIDER=ibv on the ibv provider's devices in turn (rxe0, rxe1,
// rxe0, ... in the rxevm guest, where verbs/ibv/rxevm/test-rxe runs these
// tests in its rdmanet suite). newRuntime also closes it when the test
// ends.
func openRuntime(t testing.TB, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	provider := cmp.Or(os.Getenv("RDMANET_PROVIDER"), "soft")
	rt, err := benchkit.OpenRuntime(provider, "", int(runtimesOpened.Add(1)-1), opts...)
	if err != nil {
		t.Fatalf("RDMANET_PROVIDER=%s: %v", provider, err)
	}
	return rt
}

func newRuntime(t testing.TB, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	rt := openRuntime(t, opts...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("runtime Close: %v", err)
		}
	})
	return rt
}

// pipe returns two connected Conns, c1 on rtA dialing c2 on rtB.
func pipe(t testing.TB, rtA, rtB *runtime.Runtime) (c1, c2 *rdmanet.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, c2, err := rdmanet.Pipe(ctx, rtA, rtB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c1.Close(); c2.Close() })
	return c1, c2
}

var runtimesOpened atomic.Int64

func pipeOf(t testing.TB, opts ...runtime.Option) (c1, c2 *rdmanet.Conn) {
	return pipe(t, newRuntime(t, opts...), newRuntime(t, opts...))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
}

// streamRandomly writes total random bytes from c1 to c2 in writes of
// random sizes, read in reads of random sizes, while deadlines fire at
// random on both sides: a Write that times out has written what it says
// and is resumed with the rest, a Read that times out has read nothing.
// The reader must see exactly the bytes written, in order, then io.EOF.
func streamRandomly(t testing.TB, c1, c2 *rdmanet.Conn, seed uint64, total int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	want := make([]byte, total)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	writeSizes := make([]int, 0, 64)
	for range cap(writeSizes) {
		writeSizes = append(writeSizes, rng.IntN(3*4096))
	}
	readSizes := make([]int, 0, 64)
	for range cap(readSizes) {
		readSizes = append(readSizes, 1+rng.IntN(3*4096))
	}
	deadlines := make([]time.Duration, 0, 16)
	for range cap(deadlines) {
		deadlines = append(deadlines, time.Duration(rng.IntN(300))*time.Microsecond)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	writeErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		p, i, timeouts := want, 0, 0
		for len(p) > 0 {
			if i%5 == 4 {
				c1.SetWriteDeadline(time.Now().Add(deadlines[i%len(deadlines)]))
			} else {
				c1.SetWriteDeadline(time.Time{})
			}
			size := min(writeSizes[i%len(writeSizes)], len(p))
			i++
			n, err := c1.Write(p[:size])
			if n < 0 || n > size {
				writeErr <- errors.New("Write returned a count out of range")
				return
			}
			p = p[n:]
			if err != nil {
				if !isTimeout(err) {
					writeErr <- err
					return
				}
				timeouts++
				continue
			}
			if n != size {
				writeErr <- errors.New("Write returned less than asked without an error")
				return
			}
		}
		c1.SetWriteDeadline(time.Time{})
		writeErr <- c1.CloseWrite()
	}()

	got := make([]byte, 0, total)
	buf := make([]byte, 3*4096)
	for i := 0; ; i++ {
		if i%7 == 6 {
			c2.SetReadDeadline(time.Now().Add(deadlines[i%len(deadlines)]))
		} else {
			c2.SetReadDeadline(time.Time{})
		}
		n, err := c2.Read(buf[:readSizes[i%len(readSizes)]])
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			if isTimeout(err) && n == 0 {
				continue
			}
			t.Fatalf("Read after %d bytes: n %d, %v", len(got), n, err)
		}
	}
	wg.Wait()
	if err := <-writeErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		t.Fatalf("read %d bytes, wrote %d: they differ from byte %d", len(got), len(want), at)
	}
}

// TestStreamRandomSizesAndDeadlines is the property: whatever the sizes of
// writes and reads and whenever deadlines fire, the reader sees exactly
// the bytes written, in order.
func TestStreamRandomSizesAndDeadlines(t *testing.T) {
	rtA, rtB := newRuntime(t), newRuntime(t)
	for seed := range uint64(20) {
		c1, c2 := pipe(t, rtA, rtB)
		streamRandomly(t, c1, c2, seed, 1<<20)
		c1.Close()
		c2.Close()
	}
}

// FuzzStream is the property with the fuzzer choosing the seed and size.
func FuzzStream(f *testing.F) {
	f.Add(uint64(1), uint32(100_000))
	f.Add(uint64(2), uint32(4096))
	f.Add(uint64(3), uint32(1))
	rtA, rtB := newRuntime(f), newRuntime(f)
	f.Fuzz(func(t *testing.T, seed uint64, size uint32) {
		c1, c2 := pipe(t, rtA, rtB)
		streamRandomly(t, c1, c2, seed, int(size%(2<<20)))
	})
}

// TestCloseWrite: half-close gives the peer io.EOF after every byte, and
// the stream the other way goes on.
func TestCloseWrite(t *testing.T) {
	c1, c2 := pipeOf(t)
	msg := bytes.Repeat([]byte("request "), 2000)
	if _, err := c1.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := c1.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Write([]byte("x")); !errors.Is(err, rdmanet.ErrWriteClosed) {
		t.Errorf("Write after CloseWrite: %v, want ErrWriteClosed", err)
	}
	if err := c1.CloseWrite(); err != nil {
		t.Errorf("a second CloseWrite: %v, want nil", err)
	}
	got, err := io.ReadAll(c2)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("c2 read %d bytes, %v; want %d and io.EOF", len(got), err, len(msg))
	}
	if n, err := c2.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("Read after io.EOF: %d, %v; want io.EOF again", n, err)
	}
	reply := bytes.Repeat([]byte("response "), 3000)
	go func() {
		c2.Write(reply)
		c2.Close()
	}()
	got, err = io.ReadAll(c1)
	if err != nil || !bytes.Equal(got, reply) {
		t.Fatalf("c1 read %d bytes, %v; want %d and io.EOF", len(got), err, len(reply))
	}
}

// TestCloseDeliversWrittenBytes: bytes written before Close reach a peer
// that reads them, then io.EOF; none is lost, though most were still
// waiting for the peer's receive credits when Close was called.
func TestCloseDeliversWrittenBytes(t *testing.T) {
	c1, c2 := pipeOf(t)
	want := make([]byte, 4<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	done := make(chan []byte)
	go func() {
		var got []byte
		buf := make([]byte, 1000)
		for {
			n, err := c2.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				if err != io.EOF {
					t.Errorf("Read: %v", err)
				}
				break
			}
			time.Sleep(time.Microsecond) // a reader slower than the writer
		}
		done <- got
	}()
	if _, err := c1.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes of %d", len(got), len(want))
	}
}

// TestSlowReaderStopsWriter: a peer that reads nothing stops the writer
// within what the conn's send buffers and the peer's receive window hold;
// the writer's Write then waits, until its deadline, and nothing written
// is lost once the peer reads.
func TestSlowReaderStopsWriter(t *testing.T) {
	c1, c2 := pipeOf(t, runtime.WithRecvDepth(16))
	chunk := make([]byte, 64<<10)
	written := 0
	c1.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		n, err := c1.Write(chunk)
		written += n
		if err != nil {
			if !isTimeout(err) {
				t.Fatalf("Write: %v, want a timeout", err)
			}
			break
		}
		if written > 64<<20 {
			t.Fatalf("%d bytes written to a peer that reads nothing: no flow control", written)
		}
	}
	// 64 send buffers plus 2 x 16 received and held by the peer's runtime,
	// of 4 KiB each, and a message or two in between.
	const bound = (64 + 2*16 + 4) * 4096
	t.Logf("written before the writer stopped: %d bytes (bound %d)", written, bound)
	if written > bound {
		t.Errorf("%d bytes taken while the peer read nothing, want at most %d", written, bound)
	}
	c1.SetWriteDeadline(time.Time{})
	if err := c1.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c2)
	if err != nil || len(got) != written {
		t.Fatalf("the peer read %d bytes, %v; want %d", len(got), err, written)
	}
}

// TestCloseUnblocksAndAfterClose: Close unblocks a blocked Read and Write
// at once, and every later call fails with net.ErrClosed; a second Close
// says so too.
func TestCloseUnblocksAndAfterClose(t *testing.T) {
	c1, _ := pipeOf(t)
	readErr, writeErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 10))
		readErr <- err
	}()
	go func() {
		var err error
		for err == nil {
			_, err = c1.Write(make([]byte, 64<<10)) // the peer reads nothing
		}
		writeErr <- err
	}()
	time.Sleep(50 * time.Millisecond)
	closed := time.Now()
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"Read": readErr, "Write": writeErr} {
		select {
		case err := <-ch:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked %s after Close: %v, want net.ErrClosed", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("blocked %s still blocked 5 s after Close", name)
		}
	}
	t.Logf("blocked calls returned %v after Close", time.Since(closed))
	if _, err := c1.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
	if _, err := c1.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := c1.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("SetDeadline after Close: %v", err)
	}
	if err := c1.CloseWrite(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("CloseWrite after Close: %v", err)
	}
	if err := c1.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}
}

// TestPeerCloseEndsStream: the peer's Close gives Read io.EOF after what
// it wrote, and this side's Writes fail soon after, never hang.
func TestPeerCloseEndsStream(t *testing.T) {
	c1, c2 := pipeOf(t)
	if _, err := c2.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	got, err := io.ReadAll(c1)
	if err != nil || string(got) != "last words" {
		t.Fatalf("read %q, %v; want the last words and io.EOF", got, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c1.Write([]byte("anyone there?"))
		if err != nil {
			if !errors.Is(err, runtime.ErrPeerClosed) {
				t.Errorf("Write to a closed peer: %v, want ErrPeerClosed", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Writes to a closed peer still succeed after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestListenerAndDialErrors: Accept after Close, Dial to nothing, and a
// client that is not a runtime, which Accept skips.
func TestListenerAndDialErrors(t *testing.T) {
	rtA, rtB := newRuntime(t), newRuntime(t)
	ln, err := rdmanet.Listen(rtB, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A client that speaks no verbsrt hello: Accept drops it and goes on.
	junk, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	junk.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rdmanet.Dial(ctx, rtA, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close() // at once: the server's Accept returns the conn all the same
	if err := <-accepted; err != nil {
		t.Fatalf("Accept after a junk client: %v", err)
	}

	go func() {
		time.Sleep(20 * time.Millisecond)
		ln.Close()
	}()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept blocked when the listener closed: %v, want net.ErrClosed", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if err := ln.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second listener Close: %v, want net.ErrClosed", err)
	}
	if _, err := rdmanet.Dial(ctx, rtA, ln.Addr().String()); err == nil {
		t.Error("Dial to a closed listener succeeded")
	}
}

// TestConnsGiveMemoryBack: conns that come and go give their send buffers
// back: 300 of them, each writing more than its window, within a memory
// limit that holds a few dozen at once.
func TestConnsGiveMemoryBack(t *testing.T) {
	opts := []runtime.Option{runtime.WithMemoryLimit(8 << 20)}
	rtA, rtB := newRuntime(t, opts...), newRuntime(t, opts...)
	data := make([]byte, 200<<10)
	for i := range 300 {
		c1, c2 := pipe(t, rtA, rtB)
		go func() {
			c1.Write(data)
			c1.Close()
		}()
		n, err := io.Copy(io.Discard, c2)
		if err != nil || n != int64(len(data)) {
			t.Fatalf("conn %d: read %d bytes, %v", i, n, err)
		}
		c2.Close()
	}
}

// TestRuntimeClosedUnderConn: the runtime closing under open conns (a
// careless shutdown order) fails their Reads and Writes with an error,
// never a hang or a crash, and the conns' Close afterwards is harmless.
// The bytes still queued are lost, and the peer is told so: its Read fails
// with io.ErrUnexpectedEOF, where a conn's Close gives io.EOF after the
// last byte (before the fix, a plain io.EOF after 8-56 KiB of 100).
func TestRuntimeClosedUnderConn(t *testing.T) {
	rtA := openRuntime(t)
	rtB := newRuntime(t)
	c1, c2 := pipe(t, rtA, rtB)
	if _, err := c1.Write(make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 10))
		readErr <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rtA.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-readErr:
		if err == nil {
			t.Error("Read on a closed runtime succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked 5 s after its runtime closed")
	}
	if _, err := c1.Write([]byte("x")); err == nil {
		t.Error("Write on a closed runtime succeeded")
	}
	if err := c1.Close(); err != nil {
		t.Errorf("Close after the runtime closed: %v", err)
	}
	// The peer reads what reached it, then learns that the stream was cut
	// short: never an io.EOF that would pass for its end.
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, c2)
	t.Logf("the peer read %d bytes, then %v", n, err)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("the peer's Read: %v, want an error matching io.ErrUnexpectedEOF", err)
	}
}

// TestStreamWithinMemoryLimit: a conn that finds the runtime's memory
// limit reached streams with the send buffers it has, instead of failing
// its Write with ErrNoMemory.
func TestStreamWithinMemoryLimit(t *testing.T) {
	rtA, rtB := newRuntime(t, runtime.WithMemoryLimit(8<<20)), newRuntime(t)
	c1, c2 := pipe(t, rtA, rtB)
	// Take all of rtA's memory but three message buffers.
	var held []*runtime.Buffer
	for {
		b, err := rtA.Alloc(4096)
		if err != nil {
			if !errors.Is(err, runtime.ErrNoMemory) {
				t.Fatal(err)
			}
			break
		}
		held = append(held, b)
	}
	for _, b := range held[len(held)-3:] {
		b.Free()
	}
	defer func() {
		for _, b := range held[:len(held)-3] {
			b.Free()
		}
	}()
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(i / 4096)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := c1.Write(want)
		if err == nil {
			err = c1.CloseWrite()
		} else {
			c1.Close() // the reader must not wait for the rest
		}
		wrote <- err
	}()
	got, err := io.ReadAll(c2)
	if werr := <-wrote; werr != nil {
		t.Fatalf("Write within the memory limit: %v", werr)
	}
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(want))
	}
}

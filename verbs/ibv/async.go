//go:build linux && cgo

package ibv

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"os"
	"runtime/cgo"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

const (
	// asyncBatch is how many asynchronous events one crossing reads: rxe
	// raises one CQ_ERR per completion it drops, in bursts.
	asyncBatch = 16
	// asyncBuffer is how many undelivered events AsyncEvents holds before
	// the oldest is dropped.
	asyncBuffer = 64
)

// asyncReader is the goroutine that reads a context's asynchronous events
// (ibv_get_async_event on the non-blocking async fd, waited on through the
// netpoller), acknowledges them and delivers them on ch. stop ends it; so
// does an error reading the events that is not transient, which err then
// holds (Context.AsyncErr): a reader that ended silently would leave the
// runtime blind to CQ overruns and fatal errors, waiting for good.
type asyncReader struct {
	x    *devContext
	f    *os.File
	rc   syscall.RawConn
	buf  *C.struct_vrt_async // asyncBatch entries, malloc'd
	ch   chan verbs.AsyncEvent
	done chan struct{}
	// stopping is set by stop before it closes f: the error the wait then
	// returns is the end asked for, not a failure.
	stopping atomic.Bool
	// err is why the reader ended on its own, nil after stop. Written
	// before ch is closed, so read after the close without a lock.
	err error
}

func startAsync(x *devContext) (*asyncReader, error) {
	f, rc, err := newPollFile(x.c.async_fd, "ibv-async-"+x.dev.name)
	if err != nil {
		return nil, err
	}
	buf := (*C.struct_vrt_async)(C.calloc(asyncBatch, C.sizeof_struct_vrt_async))
	if buf == nil {
		f.Close()
		return nil, verbs.FromErrno("ibv_get_async_event", syscall.ENOMEM, "")
	}
	a := &asyncReader{x: x, f: f, rc: rc, buf: buf,
		ch: make(chan verbs.AsyncEvent, asyncBuffer), done: make(chan struct{})}
	go a.run()
	return a, nil
}

func (a *asyncReader) run() {
	defer close(a.done)
	defer close(a.ch)
	a.err = a.loop(a.read, a.handle)
}

// loop reads batches of events with read and hands each to handle until
// stop or an error that retrying cannot cure, which it returns (nil after
// stop). read returns how many events it read into the buffer, -errno
// when ibv_get_async_event failed, or the error of the wait on the fd. It
// is apart from the cgo calls so that tests can drive it.
func (a *asyncReader) loop(read func() (int, error), handle func(n int)) error {
	for {
		n, err := read()
		switch {
		case n > 0:
			// Even when stopping: events read must be acknowledged, or
			// Close's ibv_destroy_* waits for them forever.
			handle(n)
		case a.stopping.Load():
			return nil
		case err != nil:
			// Only stop closes the fd; any other failure of the wait
			// leaves no way to learn of events.
			return &verbs.Error{Op: "ibv_get_async_event", Err: verbs.ErrEventsLost,
				Detail: a.x.dev.name + ": waiting on the async fd: " + err.Error()}
		case n == -int(syscall.EINTR), n == -int(syscall.EAGAIN):
			// Transient: a signal interrupted the read, or the event
			// was gone when read (vrt_get_async_events reports that as
			// 0, and read waits on the fd; -EAGAIN is taken alike
			// should a provider say so). Read again.
		case n < 0:
			// EIO once the device is gone (the kernel closed the event
			// queue); any other errno leaves the queue unreadable too.
			return &verbs.Error{Op: "ibv_get_async_event", Err: verbs.ErrEventsLost,
				Errno: syscall.Errno(-n), Detail: a.x.dev.name}
		}
	}
}

// read waits until the async fd is readable and reads up to asyncBatch
// events into a.buf in one crossing: how many, or -errno.
func (a *asyncReader) read() (int, error) {
	var n int
	err := a.rc.Read(func(uintptr) bool {
		n = int(C.vrt_get_async_events(a.x.c, a.buf, asyncBatch))
		return n != 0 // 0: nothing pending, wait for the fd
	})
	return n, err
}

// handle translates, acknowledges and delivers the n events in a.buf.
func (a *asyncReader) handle(n int) {
	// Translate before acknowledging: until the ack, libibverbs will not
	// let the QP, CQ or SRQ (and so its handle) be destroyed.
	evs := unsafe.Slice(a.buf, n)
	out := make([]verbs.AsyncEvent, 0, n)
	for i := range evs {
		out = append(out, a.translate(&evs[i]))
	}
	C.vrt_ack_async_events(a.buf, C.int(n))
	for _, ev := range out {
		a.deliver(ev)
	}
}

func (a *asyncReader) translate(e *C.struct_vrt_async) verbs.AsyncEvent {
	ev := verbs.AsyncEvent{Type: verbs.EventType(e._type), Port: uint8(e.port)}
	if e.h == 0 {
		return ev
	}
	switch o := cgo.Handle(e.h).Value().(type) {
	case *qp:
		ev.QP = o
	case *cq:
		ev.CQ = o
	case *srq:
		ev.SRQ = o
	}
	return ev
}

// deliver never blocks: a consumer that falls behind loses the oldest event.
func (a *asyncReader) deliver(ev verbs.AsyncEvent) {
	for {
		select {
		case a.ch <- ev:
			return
		default:
		}
		select {
		case <-a.ch:
		default:
		}
	}
}

// stop ends the goroutine and waits for it: closing the file wakes the
// netpoller wait with an error, and os.File.Close waits out a callback in C.
func (a *asyncReader) stop() {
	a.stopping.Store(true)
	a.f.Close()
	<-a.done
	C.free(unsafe.Pointer(a.buf))
	a.buf = nil
}

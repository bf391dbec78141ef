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
// netpoller), acknowledges them and delivers them on ch. stop ends it.
type asyncReader struct {
	x    *devContext
	f    *os.File
	rc   syscall.RawConn
	buf  *C.struct_vrt_async // asyncBatch entries, malloc'd
	ch   chan verbs.AsyncEvent
	done chan struct{}
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
	evs := unsafe.Slice(a.buf, asyncBatch)
	for {
		var n int
		err := a.rc.Read(func(uintptr) bool {
			n = int(C.vrt_get_async_events(a.x.c, a.buf, asyncBatch))
			return n != 0 // 0: nothing pending, wait for the fd
		})
		if err != nil || n < 0 {
			return // closed by stop, or the fd failed for good
		}
		// Translate before acknowledging: until the ack, libibverbs will not
		// let the QP, CQ or SRQ (and so its handle) be destroyed.
		out := make([]verbs.AsyncEvent, 0, n)
		for i := range evs[:n] {
			out = append(out, a.translate(&evs[i]))
		}
		C.vrt_ack_async_events(a.buf, C.int(n))
		for _, ev := range out {
			a.deliver(ev)
		}
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
	a.f.Close()
	<-a.done
	C.free(unsafe.Pointer(a.buf))
	a.buf = nil
}

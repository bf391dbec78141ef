// Package runtime is what verbsrt's users import: a Runtime opens an RDMA
// device (the soft provider unless told otherwise), and its Endpoints turn
// verbs into Go-native asynchronous operations.
//
//	rt, _ := runtime.New()
//	defer rt.Close(ctx)
//	ln, _ := rt.Listen("127.0.0.1:0")
//	go func() { srv, _ := ln.Accept(ctx); ... }()
//	ep, _ := rt.Dial(ctx, ln.Addr().String())
//	buf, _ := rt.Alloc(4096)
//	f := ep.Write(buf.Local(), peerRef) // returns at once
//	_, err := f.Wait(ctx)               // or <-f.Done(), or f.Then(fn)
//
// Underneath, every endpoint's QP is owned by a qpactor.Actor, a goroutine
// locked to its OS thread that drains a lock-free inbox and chains what it
// finds into one PostSend (doorbell batching), and cqpoller goroutines turn
// completions into resolved futures; while an actor is awake it handles its
// own CQ's completions itself, so a busy endpoint keeps one spinning
// goroutine, not two (see package cqpoller). Sends are flow-controlled with
// receive credits, so they never meet an empty receive queue.
//
// Locked goroutines spin while there is traffic, since waking a parked one
// costs microseconds, and at most GOMAXPROCS-1 of them spin at once, so the
// goroutines waiting for futures always have a P: on a 2-core machine one
// busy endpoint's actor takes one core and its callers the other
// (bench/README.md has the measurements).
//
// Nothing is global: each Runtime has its own device context, arena,
// pollers and worker pool, and Close stops them all.
package runtime

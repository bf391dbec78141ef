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
// completions into resolved futures. Sends are flow-controlled with receive
// credits, so they never meet an empty receive queue.
//
// Nothing is global: each Runtime has its own device context, arena,
// pollers and worker pool, and Close stops them all.
package runtime

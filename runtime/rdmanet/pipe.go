package rdmanet

import (
	"context"
	"errors"
	"net"

	"github.com/verbsrt/verbsrt/internal/future"
	"github.com/verbsrt/verbsrt/runtime"
)

// Pipe connects a Conn of runtime a to a Conn of runtime b through a
// listener of b on loopback, which it closes once they are connected: the
// net.Pipe of this package, for tests and for two runtimes of one process.
func Pipe(ctx context.Context, a, b *runtime.Runtime) (c1, c2 *Conn, err error) {
	if ctx == nil {
		return nil, nil, &net.OpError{Op: "dial", Net: network, Err: future.ErrNilContext}
	}
	ln, err := Listen(b, "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	c1, err = Dial(ctx, a, ln.Addr().String())
	if err != nil {
		ln.Close() // ends the Accept
		<-ch
		return nil, nil, err
	}
	var r accepted
	select {
	case r = <-ch:
	case <-ctx.Done():
		ln.Close() // ends the Accept
		if r = <-ch; r.err == nil {
			r.c.Close()
		}
		r.err = ctx.Err()
	}
	if r.err != nil {
		c1.Close()
		return nil, nil, errors.Join(errors.New("rdmanet: Pipe: accepting"), r.err)
	}
	return c1, r.c.(*Conn), nil
}

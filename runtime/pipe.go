package runtime

import (
	"context"
	"errors"

	"github.com/verbsrt/verbsrt/internal/future"
)

// Pipe connects a new endpoint of client to a new endpoint of server and
// returns both: Listen on a loopback port of server, Dial from client,
// Accept, and close the listener, in one call. It is for two parts of one
// program and for tests; client and server may be the same runtime. Over
// the soft provider both runtimes must reach each other (WithProvider: one
// provider, or the default one of the process).
//
// If ctx ends or either side fails, Pipe closes what it made and returns
// the error; no endpoint is left behind.
func Pipe(ctx context.Context, client, server *Runtime) (*Endpoint, *Endpoint, error) {
	if ctx == nil {
		return nil, nil, future.ErrNilContext
	}
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type accepted struct {
		ep  *Endpoint
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan accepted, 1)
	go func() {
		ep, err := ln.Accept(ctx)
		ch <- accepted{ep, err}
	}()
	cli, derr := client.Dial(ctx, ln.Addr().String())
	if derr != nil {
		cancel() // the Accept above may wait for a client that never came
	}
	srv := <-ch
	if derr == nil && srv.err == nil {
		return cli, srv.ep, nil
	}
	for _, ep := range []*Endpoint{cli, srv.ep} {
		if ep != nil {
			ep.Close(context.Background())
		}
	}
	return nil, nil, errors.Join(derr, srv.err)
}

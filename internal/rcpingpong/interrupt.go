package rcpingpong

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/verbsrt/verbsrt/internal/provider"
	"github.com/verbsrt/verbsrt/verbs"
)

// interruptGrace is how long a pingpong interrupted by a signal has to
// end on its own before the signal's handler reports and exits for it.
const interruptGrace = 2 * time.Second

// OnInterrupt makes SIGINT and SIGTERM end a pingpong with a report of
// where it stood, for a harness that kills a stalled one: the context it
// returns ends at the signal, so the exchange loop returns with its
// counts in the error, and the function it returns, called once the
// pingpong returned, writes the provider's packet counts to w if a
// signal came. A pingpong blocked where the context does not reach (a
// TCP accept) is reported and ended by the handler after interruptGrace.
func OnInterrupt(w io.Writer, p verbs.Provider) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	returned := make(chan struct{})
	handled := make(chan struct{})
	var sig os.Signal
	go func() {
		defer close(handled)
		select {
		case sig = <-sigs:
		case <-returned:
			return
		}
		cancel()
		select {
		case <-returned:
		case <-time.After(interruptGrace):
			fmt.Fprintf(w, "pingpong: %v, and still running %v later\n", sig, interruptGrace)
			provider.ReportPackets(w, p)
			os.Exit(1)
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(returned)
		<-handled
		if sig != nil {
			fmt.Fprintf(w, "pingpong: %v\n", sig)
			provider.ReportPackets(w, p)
		}
		cancel()
	}
}

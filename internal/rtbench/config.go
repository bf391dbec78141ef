package rtbench

import (
	"io"
	"time"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/internal/provider"
)

// Config is one run's parameters, perftest's by the names of
// "verbsrt bench".
type Config struct {
	Test     string // write, read, send or atomic
	Lat      bool   // latency (ib_*_lat) instead of bandwidth (ib_*_bw)
	PingPong bool   // with Lat: half a SEND/Recv round trip, as ib_send_lat
	Provider provider.Spec
	Dev      string // client device, or this end's ("": the provider's first)
	PeerDev  string // server device in one process ("": the second device, else Dev)
	// Size and All are the sizes as the client asked for them, sent to
	// the server; Sizes are the ones to run: Size, or every size with All.
	Size     int
	All      bool
	Sizes    []int
	Iters    int
	Duration time.Duration // 0: Iters operations
	QPs      int
	Callers  int
	TxDepth  int // operations each caller keeps in flight (bandwidth)
	RxDepth  int // each endpoint's largest receive window (runtime.WithRecvDepth); 0: by message size
	// PostList is how many operations each caller gives one
	// Endpoint.Post (0: one call each).
	PostList int
	GIDIndex int           // runtime.WithGIDIndex; < 0: the runtime's choice
	Progress time.Duration // progress line interval (0: none)
	// The runtime's tuning: Tuning.Spin (0: its default), Tuning.WaitPoll
	// (0: Tuning.NoWaitPoll) and Tuning.NoInlinePost, negated.
	Spin, WaitPoll time.Duration
	InlinePost     bool
	// Stats, if not nil, takes each runtime's counters when the pair
	// closes.
	Stats   io.Writer
	Timeout time.Duration // bound on connecting and on each set-up step (0: DefaultTimeout)
}

// Reporter prints a run: its header once both ends' devices are known,
// each size's result, and the end of the table.
type Reporter interface {
	Header(cliDev, srvDev string)
	Result(r benchkit.Result)
	End()
}

// Sizes of the runtimes a pair opens.
const (
	SQDepth   = 512      // max_send_wr of the bench's QPs
	RecvDepth = 64       // each endpoint's receive window without Config.RxDepth...
	RecvBytes = 16 << 20 // ...unless its receive buffers would take more than this
)

package runtime

import (
	"fmt"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// Noticing a QP that failed with nothing in flight.
//
// An endpoint learns that its QP went to the error state from a completion
// that failed or was flushed, or from an asynchronous event. Its receives
// come from a shared receive queue, which a QP's error does not flush, so
// with nothing else in flight no completion says so. Devices that follow the specification raise
// IBV_EVENT_QP_LAST_WQE_REACHED for such a QP (watchEvents), but rxe raises
// no QP event at all. So the runtime also asks each endpoint's QP for its
// state, in the background: every qpCheckPeriod, and no more than
// qpCheckRate QPs a second whatever the number of endpoints (10,000 take 10
// s, the bound on noticing a silent peer, peerlink.go). A query is a system
// call on rdma-core: the rate bounds what the checks cost, whatever the
// number of endpoints.
const (
	qpCheckTick   = 100 * time.Millisecond
	qpCheckPeriod = 2 * time.Second
	qpCheckRate   = 1000 // QPs a second, at most
)

// checkQPs queries a share of the endpoints' QPs every qpCheckTick until
// stop closes.
func (rt *Runtime) checkQPs(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(qpCheckTick)
	defer t.Stop()
	var failed []*Endpoint
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		failed = rt.checkSomeQPs(failed[:0])
		for _, ep := range failed {
			ep.failUnexplained(errUnexplainedERR)
		}
	}
}

// errUnexplainedERR is the error of an endpoint whose QP the check found
// in ERR with nothing to say why.
var errUnexplainedERR = fmt.Errorf("%w: the QP is in the error state, and no completion or event said so", ErrConnFailed)

// failUnexplained fails ep with err, its QP being in ERR (a query found
// it there, or an event said so), unless something explains it: Close (it
// sets closing before it moves the QP to ERR, and this looks after that
// news), or a completion. The completion that failed the QP may still wait
// in its CQ, its handler busy elsewhere or short of CPU: the CQ is drained
// first, and an endpoint whose CQ another goroutine handles at this moment
// is left to that goroutine.
func (ep *Endpoint) failUnexplained(err error) {
	explained := func() bool { return ep.closing.Load() || ep.Err() != nil }
	if explained() || !ep.poller.TryDrain(ep.target) || explained() {
		return
	}
	ep.fail(err, false)
}

// checkSomeQPs queries the next share of the endpoints' QPs and appends to
// failed the endpoints whose QP is in ERR unknown to them. It holds the
// runtime's lock while it queries, so that no endpoint it checks can leave
// (unregister) and destroy its QP meanwhile.
func (rt *Runtime) checkSomeQPs(failed []*Endpoint) []*Endpoint {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := len(rt.epList)
	share := (n*int(qpCheckTick) + int(qpCheckPeriod) - 1) / int(qpCheckPeriod)
	share = min(share, qpCheckRate*int(qpCheckTick)/int(time.Second))
	for range share {
		if rt.qpCheckNext >= n {
			rt.qpCheckNext = 0
		}
		ep := rt.epList[rt.qpCheckNext]
		rt.qpCheckNext++
		if ep.closing.Load() || ep.Err() != nil {
			continue
		}
		if attr, err := ep.qp.Query(); err == nil && attr.State == verbs.QPStateErr {
			failed = append(failed, ep)
		}
	}
	return failed
}

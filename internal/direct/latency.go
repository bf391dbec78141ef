package direct

import (
	"context"
	"fmt"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// The Go floor of a latency test ("verbsrt bench -direct -lat"), the same
// exchange as the runtime's -lat with no runtime. The client posts one
// signalled WR at a time and polls its send CQ until it completed: the
// time from posting to the completion is one sample, as the runtime's
// from submitting to the future's resolving. With send -lat -pingpong the
// client Sends and polls its receive CQ for the server's reply, and a
// sample is half of that round trip, as ib_send_lat reports; the server
// polls its receive CQ and Sends each message back. Both poll as the
// bandwidth floor does, yielding between empty polls.

// latency is the client's run of -lat: -n samples, one operation at a
// time. recv holds the receives a ping-pong client posted for the
// replies.
func (e *end) latency(ctx context.Context, recv *directRecv) ([]time.Duration, error) {
	total := uint64(e.cfg.Iters)
	l := e.layout()
	wrs := []verbs.SendWR{l.wr()}
	check := newAtomicCheck(e, l.remSlots)
	lats := make([]time.Duration, 0, total)
	sends := e.sendReaper()
	var (
		wcs    [1]verbs.WC
		repost []verbs.RecvWR
	)
	for seq := range total {
		l.aim(&wrs[0], seq, verbs.SendSignaled)
		t0 := time.Now()
		if _, err := e.qp.PostSend(wrs); err != nil {
			return lats, fmt.Errorf("couldn't post send: scnt=%d: %w", seq, err)
		}
		if recv == nil {
			if err := e.pollOne(ctx, e.scq, wcs[:], "", seq); err != nil {
				return lats, err
			}
			lats = append(lats, time.Since(t0))
			if err := check.done(seq, seq+1); err != nil {
				return lats, err
			}
			continue
		}
		sends.posted++
		if err := e.pollOne(ctx, e.rcq, wcs[:], "the reply to ", seq); err != nil {
			return lats, err
		}
		lats = append(lats, time.Since(t0)/2)
		if err := recv.consume(e, &wcs[0], seq, total, &repost); err != nil {
			return lats, err
		}
		if err := recv.repost(e, repost); err != nil {
			return lats, err
		}
		repost = repost[:0]
		if err := sends.reap(ctx, false); err != nil {
			return lats, err
		}
	}
	if recv != nil {
		recv.reportCheck(e, total)
		if err := sends.reap(ctx, true); err != nil {
			return lats, err
		}
	}
	return lats, e.checkClient(total, check)
}

// echo is a ping-pong server's run: -n times, it polls its receive CQ
// for the client's message, checks it and Sends one back.
func (e *end) echo(ctx context.Context, recv *directRecv) error {
	total := uint64(e.cfg.Iters)
	l := e.layout()
	wrs := []verbs.SendWR{l.wr()}
	sends := e.sendReaper()
	var (
		wcs    [1]verbs.WC
		repost []verbs.RecvWR
	)
	for seq := range total {
		if err := e.pollOne(ctx, e.rcq, wcs[:], "", seq); err != nil {
			return err
		}
		if err := recv.consume(e, &wcs[0], seq, total, &repost); err != nil {
			return err
		}
		l.aim(&wrs[0], seq, verbs.SendSignaled)
		if _, err := e.qp.PostSend(wrs); err != nil {
			return fmt.Errorf("couldn't post send: scnt=%d: %w", seq, err)
		}
		sends.posted++
		if err := recv.repost(e, repost); err != nil {
			return err
		}
		repost = repost[:0]
		if err := sends.reap(ctx, false); err != nil {
			return err
		}
	}
	recv.reportCheck(e, total)
	return sends.reap(ctx, true)
}

// pollOne polls cq until one completion came, and fails if it is not
// operation seq's success. what names it in the error ("the reply to ").
func (e *end) pollOne(ctx context.Context, cq verbs.CQ, wcs []verbs.WC, what string, seq uint64) error {
	if _, err := spinPoll(ctx, cq, wcs[:1]); err != nil {
		return fmt.Errorf("poll CQ for %soperation %d: %w", what, seq, err)
	}
	if wc := &wcs[0]; wc.Status != verbs.WCSuccess {
		return fmt.Errorf("%soperation %d completed with error: %w", what, seq, wc.Err())
	}
	if cq == e.scq && wcs[0].WRID != seq {
		return fmt.Errorf("operation %d: the completion of %d came instead", seq, wcs[0].WRID)
	}
	return nil
}

// sendReaper takes the completions of a ping-pong end's Sends, each
// signalled, off its send CQ without waiting for them, unless the send
// queue is full: on RC a Send completes once the peer acknowledged it,
// which may come after the reply it answers.
type sendReaper struct {
	e            *end
	posted, done uint64
	wcs          []verbs.WC
}

func (e *end) sendReaper() *sendReaper {
	return &sendReaper{e: e, wcs: make([]verbs.WC, directPollSize)}
}

// reap takes what has completed: it waits while the send queue is full,
// and with all until every Send completed, so that none is in flight
// when the QP is destroyed.
func (s *sendReaper) reap(ctx context.Context, all bool) error {
	for s.posted > s.done {
		n, err := s.e.scq.Poll(s.wcs)
		if err == nil && n == 0 {
			if !all && s.posted-s.done < uint64(s.e.cfg.TxDepth) {
				return nil
			}
			n, err = spinPoll(ctx, s.e.scq, s.wcs)
		}
		if err != nil {
			return fmt.Errorf("poll send CQ: %w", err)
		}
		for i := range s.wcs[:n] {
			if wc := &s.wcs[i]; wc.Status != verbs.WCSuccess {
				return fmt.Errorf("send %d completed with error: %w", wc.WRID, wc.Err())
			}
		}
		s.done += uint64(n)
	}
	return nil
}

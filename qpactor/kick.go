package qpactor

// kickReason is why a goroutine other than the run's holder tells the
// actor that something changed what a run looks at.
type kickReason uint8

const (
	// kickSubmit: a submission was queued (push).
	kickSubmit kickReason = iota
	// kickCompleted: completions gave send-queue slots back (Polled).
	kickCompleted
	// kickWaiter: a goroutine is about to wait for a future of the actor,
	// whose operation may be queued (WaitUntil).
	kickWaiter
	// kickGrant: the peer granted receive credits (GrantPeerCredits).
	kickGrant
	// kickReport: a credit report fell due (WantReport).
	kickReport
	// kickWake: anything else a run must see: a close or a break,
	// credits that failed WRs gave back, a queued submission's context
	// ending, a report due while its caller holds a lock, a bound's timer.
	kickWake
)

// kickAction is what a kick does.
type kickAction uint8

const (
	// actNone: nothing; a run will see it, or nothing waits on it.
	actNone kickAction = iota
	// actBound: leave the work queued for what is about to post it (the
	// next completion, the credits' grant), and arrange a wake-up after
	// the spin window in case that is slow to come.
	actBound
	// actInline: take the run if it is free and drain on the calling
	// goroutine (runInline); if it is held, keep its holder going.
	actInline
	// actWake: take the run if it is free and hand it to an actor
	// goroutine; if it is held, keep its holder going.
	actWake
)

// kickView is what decideKick looks at: the actor's state as the kicking
// goroutine read it, after it published its change.
type kickView struct {
	inline      bool // Config.InlinePost
	worthInline bool // inlineWorthIt: a PostSend is cheap, or nothing is in flight
	coalesces   bool // queued work may wait for the next completion
	headWaits   bool // the inbox's head waits for credits
	queued      int  // submissions in the inbox
	// ctxCanEnd: the submission just queued has a context that can end,
	// which only a goroutine of the actor watches.
	ctxCanEnd       bool
	boundArmed      bool // a wake-up after the spin window is set
	waitsForCredits bool // the actor rested waiting for credits
	beyondWindow    bool // a grant left the actor holding more than its window
}

// decideKick chooses between posting inline, leaving work to coalesce and
// waking the actor goroutine: the one place that choice is made.
func decideKick(r kickReason, v kickView) kickAction {
	switch r {
	case kickSubmit:
		switch {
		case v.headWaits:
			// Behind a head that waits for credits: the completion or
			// grant that brings them drains both; a drain now would post
			// nothing. A context that can end needs an actor goroutine
			// to watch it if the credits are slow: the bound starts one.
			if v.ctxCanEnd && !v.boundArmed {
				return actBound
			}
			return actNone
		case v.coalesces:
			// Left for the next completion's Polled, or a Wait, to post
			// with what follows in one PostSend. The first one queued
			// bounds the wait: a WR in flight may take long, and what is
			// queued behind it must not wait for it.
			if v.queued < 2 {
				return actBound
			}
			return actNone
		case v.inline && v.worthInline:
			return actInline
		}
		return actWake
	case kickCompleted:
		if !v.waitsForCredits && v.queued == 0 {
			return actNone
		}
		if v.inline {
			return actInline
		}
		return actWake
	case kickWaiter:
		if v.inline && v.queued > 0 {
			return actInline
		}
		return actNone
	case kickGrant:
		switch {
		case !v.inline:
			return actWake
		case v.waitsForCredits:
			// What waited for these credits is posted by the goroutine
			// that handled the grant, as a submission that finds the
			// actor idle is by its caller.
			return actInline
		case v.beyondWindow:
			return actWake // an idle actor gives the extra back
		}
		return actNone
	case kickReport:
		if v.inline && v.worthInline {
			return actInline
		}
		return actWake
	}
	return actWake
}

// view reads what decideKick looks at.
func (a *Actor) view() kickView {
	return kickView{
		inline:          a.inline,
		worthInline:     a.inlineWorthIt(),
		coalesces:       a.coalesces(),
		headWaits:       a.headWaits.Load(),
		queued:          a.inbox.Len(),
		boundArmed:      a.run.boundArmed.Load(),
		waitsForCredits: a.waitsForCredits.Load(),
	}
}

// kick is the one entry by which a goroutine that changed what a run
// looks at tells the actor: every wake, claim and inline drain goes
// through it.
func (a *Actor) kick(r kickReason) {
	if r == kickWake {
		a.act(actWake) // decideKick's answer whatever the view
		return
	}
	a.kickWith(r, a.view())
}

// kickWith is kick with a view the caller completed (what only it knows).
func (a *Actor) kickWith(r kickReason, v kickView) { a.act(decideKick(r, v)) }

func (a *Actor) act(do kickAction) {
	switch do {
	case actBound:
		a.run.wakeAfter(a.spin.Load())
	case actInline:
		if a.run.kick() {
			a.runInline()
		}
	case actWake:
		if a.run.kick() {
			a.handOff()
		}
	}
}

// handOff gives the run the caller holds to a new actor goroutine.
func (a *Actor) handOff() { go a.goRun() }

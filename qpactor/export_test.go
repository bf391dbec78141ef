package qpactor

import "time"

// WaitPollMicros is waitPollMicros, for the external tests.
var WaitPollMicros = waitPollMicros

// MaxPollingWaiters is maxPollingWaiters, for the external tests.
const MaxPollingWaiters = maxPollingWaiters

// SetPostCost sets what the actor learned a PostSend takes, for the
// external tests.
func (a *Actor) SetPostCost(d time.Duration) { a.postCost.Store(uint32(d)) }

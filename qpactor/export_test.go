package qpactor

// WaitPollMicros is waitPollMicros, for the external tests.
var WaitPollMicros = waitPollMicros

// MaxPollingWaiters is maxPollingWaiters, for the external tests.
const MaxPollingWaiters = maxPollingWaiters

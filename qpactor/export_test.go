package qpactor

// WaitPollMicros is waitPollMicros, for the external tests.
var WaitPollMicros = waitPollMicros

package rocev2

import "time"

// PollEvery exports pollEvery to the tests.
const PollEvery = pollEvery

// StopReceiving ends t's receive goroutine and waits for it to end: the
// socket is then read only by the polls of its device's CQs, as when the
// scheduler never runs the goroutine. Close still closes t.
func (t *Transport) StopReceiving() {
	t.rxStop.Store(true)
	t.conn.SetReadDeadline(time.Unix(1, 0))
	<-t.done
}

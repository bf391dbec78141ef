package runtime

// ListenUnaccepted is how many endpoints a listener makes that no Accept
// has taken before it stops accepting: its handshake slots and its queue
// of ready endpoints.
const ListenUnaccepted = listenSlots + listenBacklog

// SetListenAdmitted sets how many connections l admits at once
// (listenAdmitted), before its first client.
func SetListenAdmitted(l *Listener, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxAdmitted = n
}

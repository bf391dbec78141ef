package runtime

// ListenUnaccepted is how many endpoints a listener makes that no Accept
// has taken before it stops accepting: its handshake slots and its queue
// of ready endpoints.
const ListenUnaccepted = listenSlots + listenBacklog

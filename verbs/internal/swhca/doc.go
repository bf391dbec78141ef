// Package swhca is the software HCA that the in-process providers share:
// what a device keeps for its user whatever carries its work requests.
// It holds a context's resource registry (ordered destroy, async events),
// the CQ and the completion channel, and the usage counts that make an
// early destroy fail with ErrBusy as the kernel's EBUSY does.
//
// A provider keeps its engine, the part that executes work requests: in
// memory (verbs/soft) or as RoCE v2 packets (verbs/rocev2). It hands
// swhca the few things that differ between engines as hooks: what a CQ
// does when a poller finds it empty, which context owns an object.
//
// Its locks (CQ.mu, CompChannel.mu, Registry.mu, Registry.evMu) rank after
// every provider lock, in the module's one lock-order table
// (internal/lockrank); a provider calls into swhca holding its own.
package swhca

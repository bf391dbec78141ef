// Package credit is the receive-credit protocol of verbsrt's connections:
// the state machines of its sending side (Sender) and receiving side
// (Receiver) and the header that carries it on the wire. It is pure: no
// goroutines, no locks, no I/O. The actor that owns a QP asks its Sender,
// the receive pools ask each endpoint's Receiver; they post what the
// machines decide.
//
// # Credits
//
// A SEND, SEND_WITH_IMM or WRITE_WITH_IMM consumes one receive the peer
// posted; one that finds none meets an RNR NAK. So a sender spends one
// credit for each, and the receiver grants a credit for each receive it
// posts for the connection. A SEND never meets an empty receive queue,
// and RNR does not happen in normal use.
//
// # The window
//
// The receiver's window is the credits the peer holds, plus those the
// receiver owes (a receive consumed, not yet posted again) and those it
// has not reported. It starts at the initial window of the handshake,
// whose receives are posted before the connection is up, and grows up to
// the depth the receiver announced:
//
//   - A SEND whose header says backlog (its sender had more queued than
//     its credits allowed) makes the receiver want a window one larger,
//     so that it doubles each round trip while the sender is held back.
//   - A credit-only SEND that asks for a window (a submission needs more
//     credits than the window holds) makes it want that window.
//   - The window grows toward what is wanted only as far as receives can
//     back it (Receiver.Grow); the growth is owed to the peer until they
//     are posted (Receiver.Grant).
//   - Credits given back (the return after idle, below) shrink it at once,
//     never below the initial window. Nothing else shrinks it.
//
// # The reserve
//
// Data never takes a sender's last credit: it is kept for a credit-only
// SEND. Two peers that have both spent their data credits can then still
// tell each other of the receives they posted, and neither waits for
// credits only the other could report. Hence the initial window is at
// least 2, a submission may need at most the largest window less one
// (Sender.MaxBatch), and Sender.Admit, the one admission rule, takes a
// submission only when it leaves that credit.
//
// # Reports
//
// The receiver reports the credits it granted in the header of the SENDs
// of its own side: each data SEND is stamped, when it is chained, with
// every credit unreported then (one not posted gives them back). When its
// side has nothing to send, a report is due at half the window that
// receives back (the window less what is owed), at least one credit and
// less than that window, and the sender posts it in a SEND of the header
// alone, a credit-only SEND, with the credit it keeps for that. Owed
// credits do not count: they wait for a receive, and a receiver owing
// most of its window would otherwise wait for a threshold its unreported
// credits never reach while its peer holds only its reserve.
//
// # Backlog
//
// A submission the peer's credits cannot take waits, and everything queued
// behind it, so order is kept. The SENDs chained in the same drain carry
// the backlog flag. When two credits are left (one for the request, one
// kept), the sender also asks for a window of the waiting submission's
// need plus one, once per waiting submission: one larger than the window
// would otherwise wait for credits nothing in flight brings. A closing
// sender does not wait: what waits for credits fails.
//
// # The return after idle
//
// Credits beyond the initial window stand for receives the peer's other
// connections could use. A sender that has spent none for ReturnAfter,
// resting with nothing queued, gives them back in a credit-only SEND that
// spends one of them (which the peer reports back, so the sender keeps
// its initial window). Waiting that long keeps a stream that pauses for a
// moment from losing its window.
//
// # Goodbye
//
// A closing sender, once nothing is queued, posts one last credit-only
// SEND of the kind goodbye, with the credit kept for reports; the peer
// sees a graceful close. Without a credit left it sends none. Data may
// follow a goodbye's header (the runtime's close code and reason): a
// receiver that knows no such data drops it with the buffer.
//
// # The header
//
// Every SEND starts with HeaderSize bytes, gathered by the sender in front
// of the caller's data and scattered by the receiver into a buffer of its
// own, so the data stays where the caller put it and the immediate data
// of SEND_WITH_IMM and WRITE_WITH_IMM stays the application's:
//
//	0         4      5       6        8
//	| credits | kind | flags | window |
//
// The fields:
//
//   - credits (4 bytes, big-endian): the receives its sender posted for the
//     peer since its last report.
//   - kind: 0 a message (data follows, possibly none), 1 a credit report,
//     2 the goodbye (a credit report that also ends the connection).
//   - flags: bit 0, backlog; bit 1, return (the window field is credits
//     given back). Other bits are zero, other kinds unknown: a receiver
//     refuses such a SEND.
//   - window (2 bytes, big-endian): the window a credit report asks for,
//     or with the return flag the credits given back; 0 otherwise.
package credit

// Package verbstest is the conformance suite every verbs.Provider must
// pass, in the spirit of golang.org/x/net/nettest.TestConn: a provider's
// tests call Run (or RunConfig for a particular test bed) and get one
// subtest per case.
//
// The cases encode what the real stack (rdma_rxe with libibverbs) was
// measured to do in edge cases, the rules of ibv_post_send(3) and the
// contract decisions of package verbs. Where rxe and the IB specification
// (or mlx5 hardware) are known to differ, a case accepts both results and
// says so.
//
// The suite is written for real devices as much as for the software
// provider: it never sleeps to synchronize, polls completion queues with
// deadlines (Config.Timeout), and a check that something does not happen
// waits a bounded time that its comment names. A case is skipped only when
// the device refuses a feature with verbs.ErrNotSupported. Cases run one
// after the other; each opens its own contexts, QPs, CQs and memory and
// closes them when it ends.
//
// Requester A runs on the provider's first device and responder B on its
// second one when there are two, else both on the first. QPs are connected
// in memory the way ibv_rc_pingpong connects them once it has exchanged
// LID, QPN, PSN and GID.
//
// A provider's package runs the suite from one test:
//
//	func TestConformance(t *testing.T) {
//		p := soft.New(soft.Config{Devices: 2})
//		t.Cleanup(func() { p.Close() })
//		verbstest.Run(t, p)
//	}
//
// Cases are named Group/Case (RC/WriteBasic, RNR/RetryZero, UD/GRH, ...),
// so -run 'Conformance/RC/' selects a group. The ibv provider runs the
// suite against real Soft-RoCE in the rxevm guest (verbs/ibv/rxevm/run),
// where it takes about 10 s under TCG emulation.
package verbstest

package verbstest

import (
	"strings"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/verbs"
)

// Config holds the settings of a device or test bed.
type Config struct {
	// Port is the port number used on every device; 0 means 1.
	Port uint8
	// GIDIndex is the GID table index used; -1 picks the first
	// IPv4-mapped (::ffff:a.b.c.d) non-zero GID of the port, else index 0
	// (RoCEv2 over IPv4, as Soft-RoCE is usually set up). Note that the
	// zero Config asks for index 0; Run asks for -1.
	GIDIndex int
	// Timeout bounds one wait for a completion or an event; 0 means 10 s.
	// Soft-RoCE under emulation needs generous values.
	Timeout time.Duration
}

const defaultTimeout = 10 * time.Second

func (c Config) withDefaults() Config {
	if c.Port == 0 {
		c.Port = 1
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	return c
}

// Run runs every conformance case against p as subtests of t, with the
// default Config (port 1, automatic GID, 10 s waits).
func Run(t *testing.T, p verbs.Provider) {
	RunConfig(t, p, Config{GIDIndex: -1})
}

// RunConfig is Run with settings for a particular device or test bed.
func RunConfig(t *testing.T, p verbs.Provider, cfg Config) {
	s := &suite{p: p, cfg: cfg.withDefaults()}
	devs, err := p.Devices()
	if err != nil {
		t.Fatalf("%s: Devices: %v", p.Name(), err)
	}
	if len(devs) == 0 {
		t.Fatalf("%s: Devices returned no device", p.Name())
	}
	s.devA, s.devB = devs[0], devs[0]
	if len(devs) > 1 {
		s.devB = devs[1]
	}
	t.Logf("provider %s: requester A on %s, responder B on %s, port %d", p.Name(),
		s.devA.Name(), s.devB.Name(), s.cfg.Port)
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
			}
		})
	}
}

// suite is what every case gets: the provider, the settings and the two
// devices.
type suite struct {
	p          verbs.Provider
	cfg        Config
	devA, devB verbs.Device
}

// testCase is one conformance case, named Group/Case.
type testCase struct {
	name string
	fn   func(t *testing.T, s *suite)
}

type group struct {
	name  string
	cases []testCase
}

// allCases lists the cases in the order they run. The comment after a case
// names the cases of rxevm's SEMANTICS.md it encodes.
var allCases = []testCase{
	{"Device/Query", testDeviceQuery},
	{"Device/CapsGranted", testDeviceCapsGranted}, // 8a, 10a, 11a (rounding)
	{"Device/MRRegistration", testDeviceMRRegistration},
	{"Device/RegMRRefusesGoMemory", testDeviceRegMRRefusesGoMemory},

	{"QPState/PostSendBeforeRTS", testQPStatePostSendBeforeRTS}, // 1a, 1b, 1c
	{"QPState/PostRecvResetAndInit", testQPStatePostRecv},       // 1a, 1b
	{"QPState/MissingAttribute", testQPStateMissingAttribute},
	{"QPState/ExtraAttribute", testQPStateExtraAttribute},
	{"QPState/IllegalTransition", testQPStateIllegalTransition},
	{"QPState/QueryReportsState", testQPStateQuery},
	{"QPState/RecoverFromErr", testQPStateRecover},

	{"RC/WriteBasic", testRCWriteBasic},       // 3e
	{"RC/WriteMultiMTU", testRCWriteMultiMTU}, // 14a on RC
	{"RC/ReadAfterWrite", testRCReadAfterWrite},
	{"RC/Read", testRCRead},         // 4 (control)
	{"RC/SendRecv", testRCSendRecv}, // cross-cutting (RC receive WCs)
	{"RC/SendMultiMTU", testRCSendMultiMTU},
	{"RC/ScatterGather", testRCScatterGather},
	{"RC/SendWithImm", testRCSendWithImm},                           // 16a
	{"RC/WriteWithImm", testRCWriteWithImm},                         // 16b
	{"RC/WriteWithImmZeroLength", testRCWriteWithImmZeroLength},     // 16b
	{"RC/FetchAdd", testRCFetchAdd},                                 // 5a
	{"RC/CmpSwpHit", testRCCmpSwpHit},                               // 5a
	{"RC/CmpSwpMiss", testRCCmpSwpMiss},                             // 5a
	{"RC/WriteNoRemoteWrite", testRCWriteNoRemoteWrite},             // 2
	{"RC/ReadNoRemoteRead", testRCReadNoRemoteRead},                 // 4
	{"RC/AtomicNoRemoteAtomic", testRCAtomicNoRemoteAtomic},         // 5c
	{"RC/WriteBadRKey", testRCWriteBadRKey},                         // 3a
	{"RC/WriteBogusRKey", testRCWriteBogusRKey},                     // 3b
	{"RC/WriteOutOfBoundsEnd", testRCWriteOOBEnd},                   // 3c
	{"RC/WriteOutOfBoundsStart", testRCWriteOOBStart},               // 3d
	{"RC/LocalBadLKey", testRCLocalBadLKey},                         // measured on rxe through the suite
	{"RC/ZeroLengthSend", testRCZeroLengthSend},                     // 12b
	{"RC/ZeroLengthWriteBogusRKey", testRCZeroLengthWriteBogusRKey}, // 12c
	{"RC/ZeroLengthRead", testRCZeroLengthRead},                     // 12c
	{"RC/FenceReadThenWrite", testRCFence},                          // 17a
	{"RC/WriteOrdering", testRCWriteOrdering},
	{"RC/RecvTooShort", testRCRecvTooShort},   // 7
	{"RC/RetryExceeded", testRCRetryExceeded}, // 6e (status), 9a (set-up)

	// Remote access enforced by the device, on an MR over part of an arena.
	{"Access/InsideGrantedRange", testAccessInside},
	{"Access/WritePastEnd", testAccessPastEnd(opWrite)},           // 3c
	{"Access/ReadPastEnd", testAccessPastEnd(opRead)},             // 3c
	{"Access/AtomicPastEnd", testAccessPastEnd(opAtomic)},         // 3c
	{"Access/WriteBeforeStart", testAccessBeforeStart(opWrite)},   // 3d
	{"Access/ReadBeforeStart", testAccessBeforeStart(opRead)},     // 3d
	{"Access/AtomicBeforeStart", testAccessBeforeStart(opAtomic)}, // 3d
	{"Access/WriteNotGranted", testAccessNotGranted(opWrite)},     // 2
	{"Access/ReadNotGranted", testAccessNotGranted(opRead)},       // 4
	{"Access/AtomicNotGranted", testAccessNotGranted(opAtomic)},   // 5c
	{"Access/LocalWriteOnlyWrite", testAccessLocalWriteOnly(opWrite)},
	{"Access/LocalWriteOnlyRead", testAccessLocalWriteOnly(opRead)},
	{"Access/LocalWriteOnlyAtomic", testAccessLocalWriteOnly(opAtomic)},
	{"Access/DeregisteredWrite", testAccessDeregistered(opWrite)},
	{"Access/DeregisteredRead", testAccessDeregistered(opRead)},
	{"Access/DeregisteredAtomic", testAccessDeregistered(opAtomic)},

	{"RNR/RetryZero", testRNRRetryZero},                   // 6a
	{"RNR/RetryOne", testRNRRetryOne},                     // 6b
	{"RNR/MinRNRTimerHonored", testRNRTimerHonored},       // 6c, 6d
	{"RNR/RetryInfiniteRecvLater", testRNRInfinite},       // 6g
	{"RNR/WriteWithImmNoRecv", testRNRWriteWithImmNoRecv}, // 16c

	{"Signaling/UnsignaledOnlySignaledCompletes", testSigOneSignaled}, // 8a
	{"Signaling/UnsignaledSeparateCalls", testSigSeparateCalls},       // 8c
	{"Signaling/EveryFourthSignaled", testSigEveryFourth},             // 8d
	{"Signaling/SendQueueOverflow", testSigOverflow},                  // 8b
	{"Signaling/SigAll", testSigAll},

	{"Flush/ModifyToErr", testFlushModifyToErr},   // 9a
	{"Flush/PostInErr", testFlushPostInErr},       // 9b
	{"Flush/ErrorMidList", testFlushErrorMidList}, // 9c

	{"CQ/Overrun", testCQOverrun}, // 10a

	{"CompChannel/Notify", testChannelNotify},                          // 17c
	{"CompChannel/SolicitedOnly", testChannelSolicitedOnly},            // 17b
	{"CompChannel/SolicitedOnlyWakesOnError", testChannelSolicitedErr}, // 17d

	{"Inline/SendFromGoMemory", testInlineFromGoMemory}, // 11b
	{"Inline/WriteFromGoMemory", testInlineWrite},
	{"Inline/TooLong", testInlineTooLong}, // 11b, 11c

	{"Validate/TooManySGEsMidList", testValidateTooManySGEs}, // 12a
	{"Validate/AtomicMisaligned", testValidateAtomic},        // 5b

	{"RecvQueue/TooManySGEsMidList", testRecvTooManySGEs},
	{"RecvQueue/Overflow", testRecvOverflow},

	{"UD/GRH", testUDGRH},                     // 13a
	{"UD/LargerThanMTU", testUDLargerThanMTU}, // 13b
	{"UD/WrongQKey", testUDWrongQKey},         // 13c
	{"UD/NoRecvDropped", testUDNoRecv},        // 13d
	{"UD/RecvTooShort", testUDRecvTooShort},   // 13e
	{"UD/NoAH", testUDNoAH},
	{"UD/ClosedAH", testUDClosedAH},
	{"UD/CloseAHWhilePosting", testUDCloseAHWhilePosting},

	{"UC/Write", testUCWrite}, // 14a
	{"UC/WriteWithImm", testUCWriteWithImm},
	{"UC/ReadRejected", testUCReadRejected},             // 14b (verbsrt rejects at post)
	{"UC/SendNoRecvDropped", testUCSendNoRecv},          // 14c
	{"UC/WriteNoRemoteWrite", testUCWriteNoRemoteWrite}, // 14d

	{"SRQ/Query", testSRQQuery}, // 15b
	{"SRQ/SharedByTwoQPs", testSRQShared},
	{"SRQ/LimitEvent", testSRQLimitEvent}, // 15c

	{"XRC/SendToSRQ", testXRCSend}, // 15a

	{"Resources/ClosePDWithMRBusy", testResClosePDBusy},
	{"Resources/CloseCQInUseBusy", testResCloseCQBusy},
	{"Resources/UnrelatedClose", testResUnrelatedClose},
	{"Resources/ReverseClose", testResReverseClose},
	{"Resources/ContextCloseEndsAsyncEvents", testResContextClose},
	// Cross-cutting facts of SEMANTICS.md: error WCs are checked on wr_id,
	// status and qp_num only; queue sizes are read back, never assumed.
}

// groups splits allCases by the part of their names before the slash,
// keeping the order.
func groups() []group {
	var gs []group
	for _, c := range allCases {
		g, name, _ := strings.Cut(c.name, "/")
		if len(gs) == 0 || gs[len(gs)-1].name != g {
			gs = append(gs, group{name: g})
		}
		last := &gs[len(gs)-1]
		last.cases = append(last.cases, testCase{name: name, fn: c.fn})
	}
	return gs
}

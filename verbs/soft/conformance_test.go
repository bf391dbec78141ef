package soft_test

import (
	"testing"

	"github.com/verbsrt/verbsrt/verbs/soft"
	"github.com/verbsrt/verbsrt/verbs/verbstest"
)

// TestConformance runs the provider-neutral conformance suite on two soft
// devices, the requester on soft0 and the responder on soft1, once with
// doorbells executed on the poster's goroutine (the default) and once with
// every WQE left to the engine goroutine (Config.EngineOnly): the two
// paths must not differ in anything a user can see.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  soft.Config
	}{
		{"inline", soft.Config{Devices: 2}},
		{"engine-only", soft.Config{Devices: 2, EngineOnly: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := soft.New(tc.cfg)
			defer p.Close()
			verbstest.Run(t, p)
		})
	}
}

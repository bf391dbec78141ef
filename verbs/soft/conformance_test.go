package soft_test

import (
	"testing"

	"github.com/verbsrt/verbsrt/verbs/soft"
	"github.com/verbsrt/verbsrt/verbs/verbstest"
)

// TestConformance runs the provider-neutral conformance suite on two soft
// devices, the requester on soft0 and the responder on soft1.
func TestConformance(t *testing.T) {
	p := soft.New(soft.Config{Devices: 2})
	defer p.Close()
	verbstest.Run(t, p)
}

package ibv_test

import (
	"testing"

	"github.com/verbsrt/verbsrt/verbs/ibv"
	"github.com/verbsrt/verbsrt/verbs/verbstest"
)

// TestConformance holds the provider to the shared conformance suite, the
// cases the soft provider passes too. In the rxevm guest A is rxe0 and B
// rxe1, over the veth wire.
func TestConformance(t *testing.T) {
	devices(t)
	verbstest.Run(t, ibv.New())
}

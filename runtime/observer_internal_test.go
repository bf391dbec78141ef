package runtime

import (
	"testing"

	"github.com/verbsrt/verbsrt/qpactor"
)

// TestOpPhasesAreTheActors: an actor's Phase converts to the OpPhase of
// the same meaning (endpointObserver).
func TestOpPhasesAreTheActors(t *testing.T) {
	for _, c := range []struct {
		actor qpactor.Phase
		op    OpPhase
	}{{qpactor.Started, OpStarted}, {qpactor.Posted, OpPosted}, {qpactor.Ended, OpCompleted}} {
		if OpPhase(c.actor) != c.op {
			t.Errorf("actor phase %d converts to %d, want %d", c.actor, OpPhase(c.actor), c.op)
		}
	}
}

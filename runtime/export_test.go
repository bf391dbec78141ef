package runtime

import "github.com/verbsrt/verbsrt/verbs"

// SetNextActorID makes the runtime's next endpoint's actor take ID id+1,
// so tests reach the IDs a long-lived runtime reaches after many
// connections.
func SetNextActorID(rt *Runtime, id uint32) { rt.nextID.Store(id) }

// DeviceContext returns the runtime's device context, for fault injection.
func DeviceContext(rt *Runtime) verbs.Context { return rt.vctx }

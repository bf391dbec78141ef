package runtime

// SetNextActorID makes the runtime's next endpoint's actor take ID id+1,
// so tests reach the IDs a long-lived runtime reaches after many
// connections.
func SetNextActorID(rt *Runtime, id uint32) { rt.nextID.Store(id) }

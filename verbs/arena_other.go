//go:build unix && !linux

package verbs

// mapPopulate: no MAP_POPULATE here; pages fault in on first use.
const mapPopulate = 0

// dropPages leaves mem as it is: these systems' syscall package has no
// madvise, and the range must stay mapped.
func dropPages([]byte) error { return nil }

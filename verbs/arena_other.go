//go:build unix && !linux

package verbs

// mapPopulate: no MAP_POPULATE here; pages fault in on first use.
const mapPopulate = 0

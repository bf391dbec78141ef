//go:build lockrank && race

package lockrank

import "runtime"

// raceDisable and raceEnable bracket the record's own synchronization,
// which the race detector must not count as ordering the goroutines.
func raceDisable() { runtime.RaceDisable() }
func raceEnable()  { runtime.RaceEnable() }

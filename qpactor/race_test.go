//go:build race

package qpactor_test

const raceEnabled = true

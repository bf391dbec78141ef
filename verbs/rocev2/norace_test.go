//go:build !race

package rocev2_test

const raceEnabled = false

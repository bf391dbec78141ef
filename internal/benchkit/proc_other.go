//go:build !linux

package benchkit

import "time"

// Threads is known on Linux only (/proc/self/status).
func Threads() int { return -1 }

// OpenFDs is known on Linux only (/proc/self/fd).
func OpenFDs() int { return -1 }

// CPUTime is measured on Linux only.
func CPUTime() time.Duration { return -1 }

// LoadAverage is read on Linux only.
func LoadAverage() string { return "?" }

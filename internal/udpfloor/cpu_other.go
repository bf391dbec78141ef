//go:build !unix

package udpfloor

import "time"

// cpuTime returns -1: the platform has no getrusage.
func cpuTime() time.Duration { return -1 }

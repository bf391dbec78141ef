//go:build !linux

package main

import "time"

// osThreads is known on Linux only (/proc/self/status).
func osThreads() int { return -1 }

// cpuTime is measured on Linux only.
func cpuTime() time.Duration { return -1 }

// loadAverage is read on Linux only.
func loadAverage() string { return "?" }

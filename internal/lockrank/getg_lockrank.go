//go:build lockrank && (amd64 || arm64)

package lockrank

import "unsafe"

// getg returns the calling goroutine's runtime structure (getg_*.s).
func getg() unsafe.Pointer

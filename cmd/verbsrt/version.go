package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime/debug"
)

// runVersion is "verbsrt version": the module's version and the VCS
// revision it was built from, as the Go toolchain stamped them.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "usage: verbsrt version\n\nPrints the module's version, the VCS revision and the Go version verbsrt was built with.")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("no arguments (got %q)", fs.Args())
	}
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, formatVersion(bi, ok))
	return nil
}

// formatVersion spells a build's version: the main module's ("(devel)"
// when built from a work tree without a version), then the VCS revision
// and whether the tree had changes, when the toolchain recorded them, and
// the Go version.
func formatVersion(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "verbsrt (devel), no build information"
	}
	s := "verbsrt " + cmp.Or(bi.Main.Version, "(devel)")
	var rev, modified string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			modified = kv.Value
		}
	}
	if rev != "" {
		s += ", revision " + rev
		if modified == "true" {
			s += " (modified)"
		}
	}
	return s + ", " + bi.GoVersion
}

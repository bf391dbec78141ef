package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// errHelpShown is returned by a command asked for its usage (-h, -help or
// help COMMAND) once it printed it: run exits 0.
var errHelpShown = errors.New("help shown")

// errFlagsShown is returned by a command whose flags did not parse, once
// the flag package printed the reason and the flags on stderr: run exits
// 2, as a program with flag.ExitOnError would.
var errFlagsShown = errors.New("bad flags")

// usageError is a command line that parsed but cannot run, such as an
// unknown test or a size of 0: run prints it and exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// newFlagSet returns the flag set of the command called name, whose usage
// is head followed by the flags and their defaults.
func newFlagSet(name, head string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), head)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(fs.Output(), "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args with fs, the one place every command's flags are
// parsed. Asked for help, it prints fs's usage on stdout and returns
// errHelpShown; on a bad flag the flag package's message and the usage go
// to stderr, and it returns errFlagsShown.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(out.Bytes())
		return errHelpShown
	}
	stderr.Write(out.Bytes())
	return fmt.Errorf("%w: %w", errFlagsShown, err)
}

package main

import (
	"bytes"
	"maps"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// runArgs runs the command line args and returns its exit code, stdout
// and stderr.
func runArgs(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestCommandHelp: every command, help and version included, prints its
// usage on stdout and exits 0 when asked for it in each way the flag
// package and the go command take, and says nothing on stderr.
func TestCommandHelp(t *testing.T) {
	names := append(slices.Sorted(maps.Keys(commands)), "help", "version")
	for _, name := range names {
		for _, args := range [][]string{{name, "-h"}, {name, "-help"}, {name, "--help"}, {"help", name}} {
			code, stdout, stderr := runArgs(args...)
			if code != 0 || !strings.HasPrefix(stdout, "usage: verbsrt "+name) || stderr != "" {
				t.Errorf("%q: exit %d\nstdout: %.200q\nstderr: %.200q", args, code, stdout, stderr)
			}
			if _, ok := commands[name]; ok && !strings.Contains(stdout, "\nFlags:\n  -") {
				t.Errorf("%q: no flags listed:\n%s", args, stdout)
			}
		}
	}
}

// TestTopLevel: the command's own help, version and unknown commands,
// with the exit codes of the go command.
func TestTopLevel(t *testing.T) {
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string // regular expressions; "" must be empty
	}{
		{nil, 2, "", `^usage: verbsrt COMMAND`},
		{[]string{"help"}, 0, `^usage: verbsrt COMMAND(?s:.*)\n  bench .*\n  demo .*\n  devices .*\n  pingpong .*\n  serve-metrics .*\n  help .*\n  version `, ""},
		{[]string{"-h"}, 0, `^usage: verbsrt COMMAND`, ""},
		{[]string{"-help"}, 0, `^usage: verbsrt COMMAND`, ""},
		{[]string{"--help"}, 0, `^usage: verbsrt COMMAND`, ""},
		{[]string{"version"}, 0, `^verbsrt \S+.*, go1\.\d+.*\n$`, ""},
		{[]string{"-version"}, 0, `^verbsrt `, ""},
		{[]string{"--version"}, 0, `^verbsrt `, ""},
		{[]string{"version", "x"}, 2, "", `^verbsrt version: no arguments`},
		{[]string{"nope"}, 2, "", `^verbsrt: unknown command "nope"\nusage: verbsrt COMMAND`},
		{[]string{"help", "nope"}, 2, "", `unknown command "nope"`},
		{[]string{"help", "bench", "demo"}, 2, "", `one command at a time`},
		// Flag errors: the flag package's message and the flags, exit 2.
		{[]string{"demo", "-nope"}, 2, "", `^flag provided but not defined: -nope\nusage: verbsrt demo`},
		{[]string{"bench", "-s", "x"}, 2, "", `^invalid value "x" for flag -s`},
		{[]string{"devices", "extra"}, 2, "", `^verbsrt devices: unexpected argument "extra"\nrun 'verbsrt help devices'`},
	} {
		code, stdout, stderr := runArgs(c.args...)
		if code != c.code || !matches(c.stdout, stdout) || !matches(c.stderr, stderr) {
			t.Errorf("%q: exit %d, want %d\nstdout: %.300q\nstderr: %.300q", c.args, code, c.code, stdout, stderr)
		}
	}
}

// matches says whether s matches the regular expression re, or both are
// empty when re is.
func matches(re, s string) bool {
	if re == "" {
		return s == ""
	}
	return regexp.MustCompile(re).MatchString(s)
}

// TestNoSuchDevice: a device the provider does not have is an error
// naming it and the devices there are, exit 1, for each command and flag
// that names a device; nothing panics on the way out.
func TestNoSuchDevice(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "write", "-d", "rxe1", "-s", "64", "-n", "10"}, "-d rxe1: no such device on provider soft (it has soft0, soft1)"},
		{[]string{"bench", "read", "--peer-d", "rxe1", "-n", "10"}, "-peer-d rxe1: no such device on provider soft (it has soft0, soft1)"},
		{[]string{"serve-metrics", "-listen", "127.0.0.1:0", "-d", "rxe1"}, "-d rxe1: no such device on provider soft (it has soft0, soft1)"},
		{[]string{"devices", "-d", "rxe1"}, "-d rxe1: no such device on provider soft (it has soft0, soft1)"},
	} {
		var code int
		var stdout, stderr string
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%q panicked: %v\n%s", c.args, r, debug.Stack())
				}
			}()
			code, stdout, stderr = runArgs(c.args...)
		}()
		if code != 1 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d\nstdout: %.200q\nstderr: %q\nwant %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestFormatVersion: the module's version, else (devel); the VCS
// revision and whether the tree was modified when recorded.
func TestFormatVersion(t *testing.T) {
	for _, c := range []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{nil, false, "verbsrt (devel), no build information"},
		{&debug.BuildInfo{GoVersion: "go1.26.0"}, true, "verbsrt (devel), go1.26.0"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}}, true, "verbsrt v0.3.0, go1.26.0"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "f0bb6a6"}, {Key: "vcs.modified", Value: "true"}}},
			true, "verbsrt (devel), revision f0bb6a6 (modified), go1.26.0"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "f0bb6a6"}, {Key: "vcs.modified", Value: "false"}}},
			true, "verbsrt v0.3.0, revision f0bb6a6, go1.26.0"},
	} {
		if got := formatVersion(c.bi, c.ok); got != c.want {
			t.Errorf("%+v: %q, want %q", c.bi, got, c.want)
		}
	}
}

package main

import (
	"bytes"
	"maps"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	vrt "github.com/verbsrt/verbsrt/runtime"
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
		{[]string{"help"}, 0, `^usage: verbsrt COMMAND(?s:.*)\n  bench .*\n  demo .*\n  devices .*\n  doctor .*\n  pingpong .*\n  serve-metrics .*\n  udpfloor .*\n  help .*\n  version `, ""},
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
		{[]string{"serve-metrics", "-c", "4"}, 2, "", `flag provided but not defined: -c`},
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

// TestBenchRefuses: command lines bench cannot run are refused with exit
// 2 and a reason, before anything runs: a test name it does not know
// (never taken for a server's address), a size of 0 or less, a connection
// type the runtime does not have.
func TestBenchRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "foo"}, `unknown test "foo": the tests are write, read, send, atomic`},
		{[]string{"bench", "wirte", "-s", "64"}, `unknown test "wirte"`},
		{[]string{"bench", "-s", "64", "10.0.0.2"}, `unknown test "10.0.0.2"`},
		{[]string{"bench", "write", "read"}, `two tests, write and read`},
		{[]string{"bench", "-s", "0"}, `-s 0: 1 byte to 8 MiB for write`},
		{[]string{"bench", "send", "-s", "-5"}, `-s -5: 1 byte to 1 MiB for send`},
		{[]string{"bench", "atomic", "-s", "0"}, `-s 0: atomics move 8 bytes`},
		{[]string{"bench", "-c", "UD"}, `-c UD: the runtime connects RC QPs only`},
		{[]string{"bench", "-i", "2"}, `-i 2: the runtime uses port 1`},
	} {
		code, stdout, stderr := runArgs(c.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "run 'verbsrt help bench' for usage") {
			t.Errorf("%q: exit %d\nstdout: %.200q\nstderr: %q\nwant %q", c.args, code, stdout, stderr, c.want)
		}
	}
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

// TestBenchHelpDefaults: bench's help spells the defaults the code uses,
// and names the runtime's options that -spin, -wait-poll and
// -inline-post set.
func TestBenchHelpDefaults(t *testing.T) {
	_, help, _ := runArgs("bench", "-h")
	for _, want := range []string{
		"-spin duration\n    \thow long actors and pollers spin before they yield and park: the runtime's Tuning.Spin (0: the runtime's default) (default " + benchSpin.String() + ")",
		"the runtime's Tuning.WaitPoll (0: Tuning.NoWaitPoll, it yields a few dozen times and parks) (default " + vrt.DefaultTuning().WaitPoll.String() + ")",
		"the runtime's Tuning.NoInlinePost, negated (default true)",
		"(default: 65536 bandwidth, 2 latency; 8 for atomic)",
		"-callers int\n    \tgoroutines issuing operations, spread over the QPs (default 1)",
		"-c string\n    \tconnection type (the runtime connects RC QPs only) (default \"RC\")",
		"-n int\n    \titerations (default 5000)",
		"-r int\n    \teach endpoint's largest window of receive credits, the runtime's WithRecvDepth (0: 64, fewer for messages over 256 KiB)",
		"waits on TCP port -p (default 18515)",
		"time out after " + benchTimeout.String() + ".",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("bench -h lacks %q:\n%s", want, help)
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

package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// command is a subcommand: run gets the arguments after its name.
type command struct {
	run   func(args []string, stdout, stderr io.Writer) error
	usage string
}

// commands are the subcommands, by name; help and version are run's own.
var commands = map[string]command{
	"bench":         {runBench, "perftest-style bandwidth and latency tests (write, read, send, atomic) over the runtime"},
	"demo":          {runDemo, "move data over RC QPs on the soft provider and print what happened"},
	"devices":       {runDevices, "list devices, ports, GIDs and limits, like ibv_devinfo -v"},
	"doctor":        {runDoctor, "check what an RDMA deployment needs (libraries, devices, GID choice, memlock) and say how to fix it"},
	"pingpong":      {runPingpong, "ibv_rc_pingpong over the ibv or rocev2 provider: server without a host, client with one"},
	"serve-metrics": {runServeMetrics, "run a steady workload and serve its Prometheus metrics on /metrics until interrupted"},
	"udpfloor":      {runUDPFloor, "the UDP floor: plain Go moving rocev2's datagrams over UDP, what rocev2 is read against"},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes, as the go command and the flag package use them.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed
	exitUsage = 2 // the command line is wrong
)

// run runs the command line args (without the program's name) and returns
// the process's exit code. Help goes to stdout, errors to stderr.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name, args := args[0], args[1:]
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "verbsrt: unknown command %q\n", name)
		usage(stderr)
		return exitUsage
	}
	name = strings.TrimLeft(name, "-")
	err := cmd(args, stdout, stderr)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return exitOK
	case errors.Is(err, errFlagsShown):
		return exitUsage // the flag package has said what and shown the flags
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "verbsrt %s: %v\nrun 'verbsrt help %s' for usage\n", name, ue.err, name)
		return exitUsage
	}
	fmt.Fprintf(stderr, "verbsrt %s: %v\n", name, err)
	return exitFail
}

// lookup returns the command called name: a subcommand, help (also -h,
// -help and --help, as the flag package spells it) or version (also
// -version and --version).
func lookup(name string) (func(args []string, stdout, stderr io.Writer) error, bool) {
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp, true
	case "version", "-version", "--version":
		return runVersion, true
	}
	c, ok := commands[name]
	return c.run, ok
}

// usage prints the commands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: verbsrt COMMAND [flags] [arguments]")
	fmt.Fprintln(w, "\nCommands:")
	names := slices.Sorted(maps.Keys(commands))
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, commands[n].usage)
	}
	fmt.Fprintf(w, "  %-*s  %s\n", width, "help", "this list, or with a command's name its flags")
	fmt.Fprintf(w, "  %-*s  %s\n", width, "version", "print the module's version and VCS revision")
	fmt.Fprintln(w, "\n'verbsrt help COMMAND' or 'verbsrt COMMAND -h' shows a command's flags.")
	fmt.Fprintf(w, "\nProviders: the commands that open a device take -provider %s,\nor $%s when the flag is absent:\n", strings.Join(providerNames, "|"), providerEnv)
	fmt.Fprintln(w, "  soft    a device in memory: reaches runtimes of this process only (the default)")
	fmt.Fprintln(w, "  rocev2  RoCE v2 over UDP from an unprivileged socket: between processes and hosts, no NIC,")
	fmt.Fprintln(w, "          no root; -rocev2-addr is the IPv6 address it binds (default ::1), -rocev2-port")
	fmt.Fprintln(w, "          its UDP port (default 0: a free one, which the connection handshake announces)")
	fmt.Fprintln(w, "  ibv     rdma-core's libibverbs: RDMA NICs and the kernel's rxe")
}

// runHelp is "verbsrt help [COMMAND]": the list of commands, or a
// command's usage as its -h prints it, on stdout.
func runHelp(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("help", "usage: verbsrt help [COMMAND]")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		usage(stdout)
		return nil
	case 1:
		cmd, ok := lookup(fs.Arg(0))
		if !ok {
			return usageErrorf("unknown command %q", fs.Arg(0))
		}
		return cmd([]string{"-h"}, stdout, stderr)
	}
	return usageErrorf("one command at a time (got %q)", fs.Args())
}

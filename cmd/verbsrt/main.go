package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
)

// commands are the subcommands, by name.
var commands = map[string]struct {
	run   func(args []string) error
	usage string
}{
	"bench":         {runBench, "perftest-style bandwidth and latency tests (write, read, send, atomic) over the runtime"},
	"demo":          {runDemo, "move data over RC QPs on the soft provider and print what happened"},
	"devices":       {runDevices, "list devices, ports, GIDs and limits, like ibv_devinfo -v"},
	"pingpong":      {runPingpong, "ibv_rc_pingpong over the ibv provider: server without a host, client with one"},
	"serve-metrics": {runServeMetrics, "run a steady workload and serve its Prometheus metrics on /metrics until interrupted"},
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "verbsrt: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := c.run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "verbsrt "+os.Args[1]+":", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: verbsrt COMMAND [flags]")
	names := slices.Sorted(maps.Keys(commands))
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-*s  %s\n", width, n, commands[n].usage)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/verbsrt/verbsrt/internal/benchkit"
	"github.com/verbsrt/verbsrt/internal/rtbench"
)

// benchResult is one line of the report; --json prints it as is.
type benchResult = benchkit.Result

const benchRule = "---------------------------------------------------------------------------------------"

func printBenchHeader(w io.Writer, cfg benchConfig, cliDev, srvDev string) {
	mode := "BW"
	if cfg.lat {
		mode = "Latency"
	}
	fmt.Fprintln(w, benchRule)
	fmt.Fprintf(w, "                    %s %s Test\n", benchTests[cfg.test], mode)
	fmt.Fprintf(w, " Provider        : %-8s\tDevice         : %s -> %s\n", cfg.provider, cliDev, srvDev)
	fmt.Fprintf(w, " Number of qps   : %-8d\tCallers        : %d\n", cfg.qps, cfg.callers)
	fmt.Fprintf(w, " Connection type : RC      \tTX depth       : %d per caller\n", cfg.txDepth)
	fmt.Fprintf(w, " Runtime         : verbsrt \tSQ depth       : %d\n", rtbench.SQDepth)
	if cfg.postList > 0 {
		fmt.Fprintf(w, " Post list       : %-8d\t(operations a call to Endpoint.Post, one future each)\n", cfg.postList)
	}
	printLatencyLegend(w, cfg)
	fmt.Fprintln(w, benchRule)
	printColumns(w, cfg)
}

// printLatencyLegend says what a latency sample is.
func printLatencyLegend(w io.Writer, cfg benchConfig) {
	switch {
	case cfg.pingpong:
		fmt.Fprintln(w, " t is half of a ping-pong: a Send and the peer's reply Recv'd, as ib_send_lat's")
	case cfg.lat:
		fmt.Fprintln(w, " t is one operation from submit to completion: a full round trip")
		fmt.Fprintln(w, " (ib_write_lat and ib_send_lat report half of a ping-pong: -pingpong)")
	}
}

// printColumns prints the head of the table's columns, perftest's.
func printColumns(w io.Writer, cfg benchConfig) {
	if cfg.lat {
		fmt.Fprintln(w, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
		return
	}
	unit := "MB/sec"
	if cfg.gbits {
		unit = "Gb/sec"
	}
	fmt.Fprintf(w, " #bytes     #iterations    BW peak[%s]    BW average[%[1]s]   MsgRate[Mpps]\n", unit)
}

// printBenchResult prints r as a line of the table, or with --json as a
// JSON object.
func printBenchResult(w io.Writer, cfg benchConfig, r benchResult) {
	if cfg.json {
		json.NewEncoder(w).Encode(r)
		return
	}
	printBenchLine(w, cfg, r)
}

// printBenchLine prints r in perftest's format strings.
func printBenchLine(w io.Writer, cfg benchConfig, r benchResult) {
	if cfg.lat {
		fmt.Fprintf(w, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
			r.Bytes, r.Iterations, r.TMin, r.TMax, r.TTypical, r.TAvg, r.TStdev, r.T99, r.T999)
	} else {
		fmt.Fprintf(w, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n",
			r.Bytes, r.Iterations, bwUnit(cfg, r.BWPeakMBps), bwUnit(cfg, r.BWAvgMBps), r.MsgRateMpps)
	}
	if r.CPUNsPerOp > 0 {
		fmt.Fprintf(w, " CPU per operation: %.0f ns (this process, user+sys)\n", r.CPUNsPerOp)
	}
}

// bwUnit converts a bandwidth in MB/s (2^20 bytes) to the unit the table
// shows: the same, or Gb/s (10^9 bits) with --report_gbits.
func bwUnit(cfg benchConfig, mbps float64) float64 {
	if cfg.gbits {
		return mbps * (1 << 20) * 8 / 1e9
	}
	return mbps
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// benchResult is one line of the report; --json prints it as is.
type benchResult struct {
	Test       string  `json:"test"`
	Mode       string  `json:"mode"` // "bw", "lat" or "pingpong"
	Provider   string  `json:"provider"`
	Device     string  `json:"device"`
	PeerDevice string  `json:"peer_device"`
	QPs        int     `json:"qps"`
	Callers    int     `json:"callers"`
	TxDepth    int     `json:"tx_depth"`
	PostList   int     `json:"post_list,omitempty"` // -l: operations a call
	Bytes      int     `json:"bytes"`
	Iterations uint64  `json:"iterations"`
	Seconds    float64 `json:"seconds"`

	// Bandwidth: MB is 2^20 bytes, as perftest's MB/sec.
	BWPeakMBps  float64 `json:"bw_peak_mb_s,omitempty"`
	BWAvgMBps   float64 `json:"bw_avg_mb_s,omitempty"`
	MsgRateMpps float64 `json:"msg_rate_mpps,omitempty"`

	// Latency, µs: submit to completion of one operation at a time.
	TMin     float64 `json:"t_min_us,omitempty"`
	TMax     float64 `json:"t_max_us,omitempty"`
	TTypical float64 `json:"t_typical_us,omitempty"`
	TAvg     float64 `json:"t_avg_us,omitempty"`
	TStdev   float64 `json:"t_stdev_us,omitempty"`
	T99      float64 `json:"t_99_us,omitempty"`
	T999     float64 `json:"t_99_9_us,omitempty"`

	// CPUNsPerOp is the CPU time, user and system, this process spent
	// over the measured run, per operation (getrusage): what an
	// operation costs the machine, where the rate says only how fast it
	// went. 0 where the process did not run the operations (a -direct
	// WRITE or READ server) or getrusage is not available.
	CPUNsPerOp float64 `json:"cpu_ns_per_op,omitempty"`
}

// mode is benchResult.Mode for a run of cfg.
func (cfg benchConfig) mode() string {
	switch {
	case cfg.pingpong:
		return "pingpong"
	case cfg.lat:
		return "lat"
	}
	return "bw"
}

const benchRule = "---------------------------------------------------------------------------------------"

func printBenchHeader(w io.Writer, cfg benchConfig, p *benchPair) {
	mode := "BW"
	if cfg.lat {
		mode = "Latency"
	}
	fmt.Fprintln(w, benchRule)
	fmt.Fprintf(w, "                    %s %s Test\n", benchTests[cfg.test], mode)
	fmt.Fprintf(w, " Provider        : %-8s\tDevice         : %s -> %s\n", cfg.provider, p.cliDev, p.srvDev)
	fmt.Fprintf(w, " Number of qps   : %-8d\tCallers        : %d\n", cfg.qps, cfg.callers)
	fmt.Fprintf(w, " Connection type : RC      \tTX depth       : %d per caller\n", cfg.txDepth)
	fmt.Fprintf(w, " Runtime         : verbsrt \tSQ depth       : %d\n", benchSQDepth)
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

// latencyStats fills r's latency fields from the samples, as perftest
// does: t_typical is the median, the percentiles are of the sorted
// samples.
func latencyStats(r *benchResult, lats []time.Duration) {
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	var sum, sq float64
	for _, d := range lats {
		sum += us(d)
	}
	avg := sum / float64(len(lats))
	for _, d := range lats {
		sq += (us(d) - avg) * (us(d) - avg)
	}
	pct := func(p float64) float64 {
		return us(lats[min(len(lats)-1, int(math.Ceil(p*float64(len(lats))))-1)])
	}
	r.TMin, r.TMax, r.TTypical = us(lats[0]), us(lats[len(lats)-1]), us(lats[len(lats)/2])
	r.TAvg, r.TStdev = avg, math.Sqrt(sq/float64(len(lats)))
	r.T99, r.T999 = pct(0.99), pct(0.999)
}

package benchkit

import (
	"math"
	"slices"
	"time"
)

// Result is one line of a benchmark's report, of the runtime's runs and
// of the Go floor's alike, in the JSON "verbsrt bench --json" prints and
// its two ends exchange.
type Result struct {
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

// Mode is Result.Mode of a run: "pingpong", "lat" (a latency test) or
// "bw" (bandwidth).
func Mode(lat, pingpong bool) string {
	switch {
	case pingpong:
		return "pingpong"
	case lat:
		return "lat"
	}
	return "bw"
}

// LatencyStats fills r's latency fields from the samples, as perftest
// does: t_typical is the median, the percentiles are of the sorted
// samples.
func LatencyStats(r *Result, lats []time.Duration) {
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

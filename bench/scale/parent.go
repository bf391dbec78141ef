package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The child reports on its stdout, one line each: progress lines (passed
// on to the parent's stderr as they come) and, after each pair it
// connects, pairsTag and their number (kept, so that a child that dies
// says how far it got); then resultTag and its result as JSON, then
// closedTag and the closing's. Its stderr is for what kills it: the
// parent keeps the head of it and finds the reason there.
const (
	pairsTag  = "PAIRS "
	resultTag = "RESULT "
	closedTag = "CLOSED "
)

// outcome is what became of one child.
type outcome struct {
	pairs     int
	res       *result  // nil if the child died before reporting
	closed    *closing // nil if it died or hung while closing
	died      string   // why the child failed, "" if it did not
	progress  string   // its last progress line
	connected int      // the pairs it had connected
}

// closing is how the child's runtimes closed.
type closing struct {
	Took time.Duration
	Err  string
}

// runOne measures n pairs in a child process (of the given round of
// -rounds) and says what became of it.
func runOne(ctx context.Context, self string, cfg config, n, round int, log io.Writer) outcome {
	out := outcome{pairs: n}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, childArgs(cfg, n, round)...)
	stderr := &headWriter{max: 64 << 10}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		out.died = err.Error()
		return out
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		out.died = fmt.Sprintf("not started: %v", err)
		return out
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, pairsTag):
			out.connected, _ = strconv.Atoi(line[len(pairsTag):])
		case strings.HasPrefix(line, resultTag):
			var r result
			if err := json.Unmarshal([]byte(line[len(resultTag):]), &r); err != nil {
				out.died = fmt.Sprintf("unreadable result: %v", err)
			} else {
				out.res = &r
			}
		case strings.HasPrefix(line, closedTag):
			var c closing
			if err := json.Unmarshal([]byte(line[len(closedTag):]), &c); err == nil {
				out.closed = &c
			}
		default:
			out.progress = line
			fmt.Fprintf(log, "[%d pairs, %s] %s\n", n, time.Since(start).Round(time.Second), line)
		}
	}
	err = cmd.Wait()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.died = fmt.Sprintf("killed after -timeout %v", cfg.timeout)
	case err != nil:
		out.died = deathReason(stderr.String(), err)
	}
	if out.died != "" {
		fmt.Fprintf(log, "[%d pairs] died: %s\n", n, out.died)
		if head := firstLines(stderr.String(), 12); head != "" {
			fmt.Fprintf(log, "[%d pairs] its stderr began:\n%s\n", n, head)
		}
	}
	return out
}

// childArgs are the arguments of the child measuring n pairs in round.
// Its profiles are named by n, and by the round too when there are
// several (cpu.5000.r2.setup.out), so that no round overwrites another's.
func childArgs(cfg config, n, round int) []string {
	tag := strconv.Itoa(n)
	if cfg.rounds > 1 {
		tag += ".r" + strconv.Itoa(round)
	}
	args := []string{
		"-child", strconv.Itoa(n),
		"-ops", strconv.Itoa(cfg.ops),
		"-warmup", strconv.Itoa(cfg.warmup),
		"-size", strconv.Itoa(cfg.size),
		"-pause", cfg.pause.String(),
		"-idlecpu", cfg.idleCPU.String(),
	}
	if cfg.memLimit > 0 {
		args = append(args, "-memlimit", strconv.Itoa(cfg.memLimit))
	}
	if cfg.parked {
		args = append(args, "-parked")
	}
	if cfg.cpuProfile != "" {
		args = append(args, "-cpuprofile", profileName(cfg.cpuProfile, tag))
	}
	if cfg.trace != "" {
		args = append(args, "-trace", profileName(cfg.trace, tag))
	}
	if cfg.memProfile != "" {
		args = append(args, "-memprofile", profileName(cfg.memProfile, tag))
	}
	return args
}

// deathReason says why a child failed, from the head of its stderr: the
// Go runtime's fatal error or panic (with the "runtime:" line before it,
// which names the limit a thread exhaustion hit), else the child's own
// error, else how it exited.
func deathReason(stderr string, exitErr error) string {
	lines := strings.Split(stderr, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") {
			reason := strings.TrimSpace(l)
			if i > 0 && strings.HasPrefix(lines[i-1], "runtime:") {
				reason += " (" + strings.TrimSpace(lines[i-1]) + ")"
			}
			return reason
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "scale:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "scale:"))
		}
	}
	return exitErr.Error() // e.g. "signal: killed", by the kernel's OOM killer
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// headWriter keeps the first max bytes written to it and drops the rest:
// a dying process with thousands of goroutines writes megabytes of stacks
// after the line that says why.
type headWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *headWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *headWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

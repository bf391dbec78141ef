package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
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

	// With -interleave, a child that has connected its pairs and measured
	// what idleness costs says readyTag, then serves the parent's commands
	// on its stdin, one a line: blockCommand runs one block of latencies
	// on its active pair and answers blockTag with the block's number and
	// p50s (for the log; the result carries them). Its stdin's end ends
	// the blocks.
	readyTag     = "READY "
	blockTag     = "BLOCK "
	blockCommand = "block"
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
	return startChild(ctx, self, cfg, n, round, log).finish()
}

// child is a running child process: the lines it reports are read as they
// come, and with -interleave it answers the parent's commands on its stdin.
type child struct {
	n       int
	cfg     config
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	ctx     context.Context
	stdin   io.WriteCloser
	stderr  *headWriter
	log     io.Writer
	replies chan string   // readyTag and blockTag lines, in order
	done    chan struct{} // closed when stdout ends
	out     outcome       // the reader's until done is closed
}

// startChild starts the child measuring n pairs; a child that could not
// start is a child already done, its outcome saying why.
func startChild(ctx context.Context, self string, cfg config, n, round int, log io.Writer) *child {
	c := &child{n: n, cfg: cfg, log: log, out: outcome{pairs: n}, stderr: &headWriter{max: 64 << 10},
		replies: make(chan string, 16), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithTimeout(ctx, cfg.timeout)
	c.cmd = exec.CommandContext(c.ctx, self, childArgs(cfg, n, round)...)
	c.cmd.Stderr = c.stderr
	var err error
	c.stdin, err = c.cmd.StdinPipe()
	var stdout io.ReadCloser
	if err == nil {
		stdout, err = c.cmd.StdoutPipe()
	}
	if err == nil {
		if err = c.cmd.Start(); err != nil {
			err = fmt.Errorf("not started: %w", err)
		}
	}
	if err != nil {
		c.out.died = err.Error()
		c.cmd = nil
		close(c.done)
		return c
	}
	go c.read(stdout, time.Now())
	return c
}

// read takes the child's report apart (see pairsTag) until its stdout
// ends.
func (c *child) read(stdout io.Reader, start time.Time) {
	defer close(c.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, pairsTag):
			c.out.connected, _ = strconv.Atoi(line[len(pairsTag):])
		case strings.HasPrefix(line, resultTag):
			var r result
			if err := json.Unmarshal([]byte(line[len(resultTag):]), &r); err != nil {
				c.out.died = fmt.Sprintf("unreadable result: %v", err)
			} else {
				c.out.res = &r
			}
		case strings.HasPrefix(line, closedTag):
			var cl closing
			if err := json.Unmarshal([]byte(line[len(closedTag):]), &cl); err == nil {
				c.out.closed = &cl
			}
		case strings.HasPrefix(line, readyTag), strings.HasPrefix(line, blockTag):
			c.replies <- line
			fmt.Fprintf(c.log, "[%d pairs, %s] %s\n", c.n, time.Since(start).Round(time.Second), line)
		default:
			c.out.progress = line
			fmt.Fprintf(c.log, "[%d pairs, %s] %s\n", c.n, time.Since(start).Round(time.Second), line)
		}
	}
	// A scanner that stopped early (a line beyond its buffer) would leave
	// the child blocked writing to a full pipe: drain the rest.
	io.Copy(io.Discard, stdout)
}

// await waits for the child's next reply, which must carry tag, and
// fails if the child ended (or said something else) first.
func (c *child) await(tag string) error {
	select {
	case line := <-c.replies:
		if !strings.HasPrefix(line, tag) {
			return fmt.Errorf("%d pairs: said %q, want %s", c.n, line, strings.TrimSpace(tag))
		}
		return nil
	case <-c.done:
		select {
		case line := <-c.replies:
			if strings.HasPrefix(line, tag) {
				return nil
			}
		default:
		}
		return fmt.Errorf("%d pairs: the child ended before it said %s", c.n, strings.TrimSpace(tag))
	}
}

// command sends the child one command of -interleave (blockCommand) and
// waits for its answer.
func (c *child) command(cmd, tag string) error {
	if c.cmd == nil {
		return fmt.Errorf("%d pairs: %s", c.n, c.out.died)
	}
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return fmt.Errorf("%d pairs: %w", c.n, err)
	}
	return c.await(tag)
}

// finish closes the child's stdin (a child serving -interleave's blocks
// takes that as the end of them), waits for it to end and says what
// became of it.
func (c *child) finish() outcome {
	defer c.cancel()
	if c.cmd == nil {
		return c.out
	}
	c.stdin.Close()
	<-c.done
	err := c.cmd.Wait()
	out := c.out
	switch {
	case c.ctx.Err() != nil && errors.Is(c.ctx.Err(), context.DeadlineExceeded):
		out.died = fmt.Sprintf("killed after -timeout %v", c.cfg.timeout)
	case err != nil:
		out.died = deathReason(c.stderr.String(), err)
	}
	if out.died != "" {
		fmt.Fprintf(c.log, "[%d pairs] died: %s\n", c.n, out.died)
		if head := firstLines(c.stderr.String(), 12); head != "" {
			fmt.Fprintf(c.log, "[%d pairs] its stderr began:\n%s\n", c.n, head)
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
	if cfg.interleave > 0 {
		args = append(args, "-interleave", strconv.Itoa(cfg.interleave))
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

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
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

// runInterleaved runs one round of -interleave. It starts the children one
// after another, each once the one before is ready (connected and idle),
// so that no child's setup overlaps another's measuring; then they take
// turns, one block of latencies each, the order reversed from one block
// to the next; then they end one after another. The machine's speed
// drifts over seconds (see benchkit.CoreToCore), and a block lasts
// milliseconds: blocks side by side ran on the same machine. While one
// child measures, the others idle, which the idle-CPU column shows to be
// small.
func runInterleaved(ctx context.Context, self string, cfg config, round int, log io.Writer) []outcome {
	log = &lockedWriter{w: log} // the children's readers share it
	var children, live []*child
	for _, n := range cfg.pairs {
		c := startChild(ctx, self, cfg, n, round, log)
		children = append(children, c)
		if err := c.await(readyTag); err != nil {
			fmt.Fprintf(log, "[%d pairs] not ready: %v\n", n, err) // its outcome says why
			continue
		}
		live = append(live, c)
	}
	for b := range cfg.interleave {
		order := slices.Clone(live)
		if b%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			if err := c.command(blockCommand, blockTag); err != nil {
				fmt.Fprintf(log, "[%d pairs] block %d: %v\n", c.n, b+1, err)
				live = slices.DeleteFunc(live, func(l *child) bool { return l == c })
			}
		}
	}
	outs := make([]outcome, len(children))
	for i, c := range children {
		outs[i] = c.finish()
	}
	return outs
}

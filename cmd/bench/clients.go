package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clientProcessEnv, when set (to the server's URL), makes the bench binary
// a client process instead: see runClientProcess.
const clientProcessEnv = "CONVO_BENCH_CLIENTS"

// childGroup is a group of StreamConversation clients in a child process
// (this same binary), so that their goroutines do not share the server's
// scheduler and their memory is not counted as the server's. The protocol
// on its stdin and stdout is runClientProcess's.
type childGroup struct {
	m      *Main
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, closed at EOF
	n      int
	cancel context.CancelFunc

	// heap and stacks are the child's own bytes per stream once all were
	// open (after GC).
	heap, stacks float64

	once sync.Once
	recs [][]int64
	err  error
}

// startClients starts a child process with one StreamConversation client
// (of kind via) per id, recording total deltas each.
func (m *Main) startClients(ctx context.Context, url, via string, total int, ids []string) (*childGroup, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Bounded: the child is killed if the run ends without finish.
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), clientProcessEnv+"="+url)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	m.addChild(cmd.Process.Pid)
	g := &childGroup{m: m, cmd: cmd, stdin: stdin, lines: make(chan string, 16), n: len(ids), cancel: cancel}
	go func() {
		defer close(g.lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			g.lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	w := bufio.NewWriter(stdin)
	fmt.Fprintf(w, "%s %d %d %d\n", via, m.Config.StreamsPerConn, total, len(ids))
	for _, id := range ids {
		fmt.Fprintln(w, id)
	}
	if err := w.Flush(); err != nil {
		g.finish() //nolint:errcheck // the write error says more
		return nil, fmt.Errorf("client process: %w", err)
	}
	return g, nil
}

func (g *childGroup) next(ctx context.Context, limit time.Duration) (string, error) {
	select {
	case line, ok := <-g.lines:
		if !ok {
			return "", errors.New("client process ended")
		}
		if msg, ok := strings.CutPrefix(line, "error "); ok {
			return "", fmt.Errorf("client process: %s", msg)
		}
		return line, nil
	case <-time.After(limit):
		return "", timeoutf("client process silent for %v", limit)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (g *childGroup) await(ctx context.Context, s stage, limit time.Duration) error {
	line, err := g.next(ctx, limit)
	if err != nil {
		return err
	}
	word, rest, _ := strings.Cut(line, " ")
	if word != s.String() {
		return fmt.Errorf("client process said %q, want %s", line, s)
	}
	if s == stageOpened {
		if _, err := fmt.Sscanf(rest, "%g %g", &g.heap, &g.stacks); err != nil {
			return fmt.Errorf("client process said %q", line)
		}
	}
	return nil
}

// finish closes the child's stdin, which ends its streams, and reads the
// arrival times it then prints.
func (g *childGroup) finish() ([][]int64, error) {
	g.once.Do(func() {
		defer g.cancel()
		g.stdin.Close()
		for range g.n {
			line, err := g.next(context.Background(), time.Minute)
			if err != nil {
				g.err = err
				break
			}
			var rec []int64
			for f := range strings.FieldsSeq(line) {
				v, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					g.err = fmt.Errorf("client process said %q", line)
					break
				}
				rec = append(rec, v)
			}
			g.recs = append(g.recs, rec)
		}
		// Drain, so the child can exit; a child that does not is killed.
		drain := time.NewTimer(30 * time.Second)
		defer drain.Stop()
	wait:
		for {
			select {
			case _, ok := <-g.lines:
				if !ok {
					break wait
				}
			case <-drain.C:
				g.cmd.Process.Kill() //nolint:errcheck // it may have just exited
				drain.Reset(time.Minute)
			}
		}
		if err := g.cmd.Wait(); err != nil && g.err == nil {
			g.err = fmt.Errorf("client process: %w", err)
		}
		g.m.removeChild(g.cmd.Process.Pid)
	})
	return g.recs, g.err
}

// runClientProcess is the child process of startClients. It reads "via
// perConn total n" and n conversation ids from in, and opens one
// StreamConversation per id against url. It writes "opened <heap>
// <stacks>" (its own bytes per stream, after GC) once every stream has its
// snapshot, then, when total > 0, "warm" and "done" once every stream has
// received the last warm-up delta and the last delta. At EOF on in it
// closes the streams and writes each one's arrival times, one line per
// stream in the order given. A failure is written as "error <message>".
func runClientProcess(ctx context.Context, url string, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	r := bufio.NewReader(in)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	var via string
	var perConn, total, n int
	if _, err := fmt.Sscanf(head, "%s %d %d %d", &via, &perConn, &total, &n); err != nil || !isConnect(via) || perConn < 1 || n < 1 {
		return fmt.Errorf("bad header %q", head)
	}
	ids := make([]string, n)
	for i := range ids {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		ids[i] = strings.TrimSpace(line)
	}
	// The parent closes our stdin when it is done with us.
	running, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		io.Copy(io.Discard, r) //nolint:errcheck // EOF or error: either way, stop
		stop()
	}()

	before := settledMem()
	cs := newClientSet(url, via, n, perConn)
	defer cs.close()
	g := newLocalGroup(ctx, n, total, func(ctx context.Context, i int, r *receiver, ready func(error)) {
		connectSubscriber(ctx, cs.client(i, perConn), ids[i], r, ready)
	})
	stages := []stage{stageOpened}
	if total > 0 {
		stages = append(stages, stageWarm, stageDone)
	}
	for _, s := range stages {
		if err := g.await(running, s, 10*time.Minute); err != nil {
			if running.Err() == nil {
				fmt.Fprintf(out, "error %v\n", err)
			}
			break
		}
		if s == stageOpened {
			after := settledMem()
			fmt.Fprintf(out, "opened %.0f %.0f\n", perEach(after.heap, before.heap, n), perEach(after.stacks, before.stacks, n))
			continue
		}
		fmt.Fprintln(out, s)
	}
	<-running.Done()
	recs, _ := g.finish()
	w := bufio.NewWriter(out)
	for _, rec := range recs {
		for i, v := range rec {
			if i > 0 {
				w.WriteByte(' ')
			}
			w.WriteString(strconv.FormatInt(v, 10))
		}
		w.WriteByte('\n')
	}
	return w.Flush()
}

// addChild and removeChild track the running client processes, whose CPU
// counts as the bench's.
func (m *Main) addChild(pid int) {
	m.childMu.Lock()
	defer m.childMu.Unlock()
	if m.children == nil {
		m.children = make(map[int]bool)
	}
	m.children[pid] = true
}

func (m *Main) removeChild(pid int) {
	m.childMu.Lock()
	defer m.childMu.Unlock()
	delete(m.children, pid)
}

func (m *Main) childTicks() float64 {
	m.childMu.Lock()
	defer m.childMu.Unlock()
	var total float64
	for pid := range m.children {
		if t, _, ok := procTimes(strconv.Itoa(pid)); ok {
			total += t
		}
	}
	return total
}

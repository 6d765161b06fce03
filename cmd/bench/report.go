package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Results is everything one Run measured.
type Results struct {
	Env        Environment
	Latency    []LatencyResult
	Throughput []ThroughputResult
	Memory     []MemoryResult
	Peer       []PeerResult
	Chat       []ChatResult
}

// Environment says where the figures come from.
type Environment struct {
	Date      time.Time
	CPU       string
	CPUs      int
	GoVersion string
	Postgres  string
	Settings  string // fsync, synchronous_commit, wal_level
	Database  string // private (pgembed) or --database-url
}

// Stats summarises durations (nanoseconds).
type Stats struct {
	N             int
	P50, P99, Max time.Duration
}

// summarize returns the nearest-rank percentiles of samples (which it
// sorts).
func summarize(samples []int64) Stats {
	if len(samples) == 0 {
		return Stats{}
	}
	slices.Sort(samples)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(samples)))) - 1
		return time.Duration(samples[min(max(i, 0), len(samples)-1)])
	}
	return Stats{N: len(samples), P50: rank(0.50), P99: rank(0.99), Max: time.Duration(samples[len(samples)-1])}
}

func (m *Main) environment(ctx context.Context) (Environment, error) {
	env := Environment{
		Date: time.Now().UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		CPU: cpuModel(), Database: "private PostgreSQL (pgembed) in a temporary directory",
	}
	if m.cluster == nil {
		env.Database = "--database-url"
	}
	// The writers' session settings are what their commits do.
	var fsync, syncCommit, walLevel string
	err := m.writers.QueryRow(ctx, settingsSQL).Scan(&env.Postgres, &fsync, &syncCommit, &walLevel)
	if err != nil {
		return env, fmt.Errorf("read server settings: %w", err)
	}
	env.Settings = fmt.Sprintf("fsync=%s, writers' synchronous_commit=%s, wal_level=%s", fsync, syncCommit, walLevel)
	return env, nil
}

// cpuModel is the CPU's name from /proc/cpuinfo, or GOARCH elsewhere.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func kb(b float64) string { return fmt.Sprintf("%.1f", b/1024) }

// String shows a CPU share as "server / clients / postgres / others"
// percentages of the machine.
func (s CPUShare) String() string {
	if !s.Known {
		return "–"
	}
	pg := "?"
	if s.PostgresKnown {
		pg = fmt.Sprintf("%.0f", 100*s.Postgres)
	}
	return fmt.Sprintf("%.0f / %.0f / %s / %.0f", 100*s.Server, 100*s.Clients, pg, 100*s.Others)
}

// print writes the report as Markdown.
func (r Results) print(w io.Writer, c Config) {
	e := r.Env
	fmt.Fprintf(w, "\n%s UTC; %s, %d CPUs; %s; PostgreSQL %s (%s; %s)\n",
		e.Date.Format("2006-01-02 15:04"), e.CPU, e.CPUs, e.GoVersion, e.Postgres, e.Database, e.Settings)
	if len(r.Latency) > 0 {
		fmt.Fprintf(w, "\n### Commit-to-subscriber latency (ms)\n\n")
		fmt.Fprintf(w, "From convo.append_block returning (committed) to each subscriber receiving the delta; %d timed deltas of %d bytes per writer.\n",
			c.Deltas, c.DeltaBytes)
		fmt.Fprintf(w, "via web: StreamConversation clients over h2c configured as connect-web (JSON, no compression); go: connect-go's defaults (binary, gzip); hub: Hub.Open + Next in the server's process. ")
		fmt.Fprintf(w, "%d streams per client connection; \"child\": the clients run in a child process on the same machine, \"same process\": in the server's.\n", c.StreamsPerConn)
		fmt.Fprintf(w, "slowest p50: median over deltas of the last subscriber's latency; hub probe: one Hub.Open per conversation next to the clients (commit to hub fan-out).\n")
		fmt.Fprintf(w, "CPU: %% of the whole machine (all cores) used by the server process (with the writers and, for \"same process\", the clients) / the client process / PostgreSQL (? when not known) / every other process, while the deltas were timed; ")
		fmt.Fprintf(w, "server CPU per delta: the server process's CPU time over the deltas written (ms; includes the writers' and the hub probes').\n\n")
		fmt.Fprintln(w, "| feed | conversations × subscribers | via | every | deltas/s | p50 | p99 | max | slowest p50 | hub probe p50 / p99 | append_block p50 | lost | CPU | server CPU per delta |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, l := range r.Latency {
			via := l.Via
			switch {
			case l.ClientProcess:
				via += " (child)"
			case isConnect(l.Via):
				via += " (same process)"
			}
			probe := "–"
			if l.Probe.N > 0 {
				probe = ms(l.Probe.P50) + " / " + ms(l.Probe.P99)
			}
			perDelta := "–"
			if n := l.Append.N; n > 0 && l.CPU.Known {
				perDelta = fmt.Sprintf("%.2f", 1e3*l.CPU.Seconds/float64(n))
			}
			fmt.Fprintf(w, "| %s | %d × %d | %s | %v | %.0f | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n",
				l.Feed, l.Conversations, l.SubscribersPerConversation, via, l.Interval, l.Rate,
				ms(l.Latency.P50), ms(l.Latency.P99), ms(l.Latency.Max), ms(l.Slowest.P50), probe, ms(l.Append.P50), l.Lost, l.CPU, perDelta)
		}
	}
	if len(r.Throughput) > 0 {
		fmt.Fprintf(w, "\n### Sustained deltas per second\n\n")
		fmt.Fprintf(w, "Each writer on its own conversation and connection, as fast as it can, %v measured (mean of %d alternating rounds).\n", c.Duration, c.Rounds)
		fmt.Fprintf(w, "Baseline: the same PostgreSQL committing one event row + pg_notify per transaction (one round trip, a listener draining).\n\n")
		fmt.Fprintln(w, "append_block is called without delta_seq, and with it as the Go worker calls it (each writer numbering its block's appends).")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| feed | writers | append_block/s | ratio (rounds' range) | with delta_seq/s | ratio (rounds' range) | INSERT + pg_notify/s | INSERT alone/s | CPU |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		for _, t := range r.Throughput {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %.0f | %.0f | %s |\n", t.Feed, t.Writers,
				rate(t.API), ratio(t.API, t.Bare, t.MinRatio, t.MaxRatio),
				rate(t.APISeq), ratio(t.APISeq, t.Bare, t.MinRatioSeq, t.MaxRatioSeq),
				t.Bare, t.BareNoNotify, t.CPU)
		}
	}
	if len(r.Memory) > 0 {
		fmt.Fprintf(w, "\n### Memory per idle subscriber (KB, after GC)\n\n")
		fmt.Fprintf(w, "connect: the server process's growth while a child process holds StreamConversation streams (as connect-web: JSON; %d per connection); hub: Hub.Open + a goroutine in Next. Each subscriber follows a conversation of its own.\n\n", c.StreamsPerConn)
		fmt.Fprintln(w, "| feed | what | subscribers | heap | stacks | total | client process (heap + stacks) |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		for _, mr := range r.Memory {
			client := "–"
			if mr.Stack == "connect" {
				client = kb(mr.ClientHeap + mr.ClientStacks)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s |\n", mr.Feed, mr.Stack, mr.Subscribers, kb(mr.Heap), kb(mr.Stacks), kb(mr.Total()), client)
		}
	}
	if len(r.Chat) > 0 {
		printChat(w, r.Chat)
		printChatStages(w, r.Chat)
	}
	fmt.Fprintf(w, "\nTargets (2 cores): p50 < 2 ms and p99 < 20 ms with 1,000 subscribers; < 32 KB per idle subscriber; append_block ≥ 80%% of INSERT + pg_notify.\n")
}

// rate is a measured rate per second, or a dash when it was not measured.
func rate(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

// ratio is v / bare as a percentage with the rounds' range, or a dash when
// v was not measured.
func ratio(v, bare, lo, hi float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%% (%.0f–%.0f%%)", 100*v/bare, 100*lo, 100*hi)
}

// printChat writes the chat measurement's table.
func printChat(w io.Writer, rs []ChatResult) {
	fmt.Fprintf(w, "\n### Chat: many replies at once, one reader each\n\n")
	fmt.Fprintf(w, "cmd/api with N in-process workers of the demo model at %s tokens/s, limits off, bearer tokens (HS256) of one user for all replies or a user each. Orders: ", num(rs[0].TokensPerS))
	for i, o := range chatOrders {
		if i > 0 {
			fmt.Fprintf(w, "; ")
		}
		fmt.Fprintf(w, "%s: %s", o, chatStarts[o])
	}
	fmt.Fprintf(w, " (the reader process sends them, each on a new connection). ")
	fmt.Fprintf(w, "Readers in a child process, each on its own HTTP/1.1 connection: sse (GET /v1/conversations/{id}/events) or connect (StreamConversation, Connect protocol, JSON). ")
	fmt.Fprintf(w, "Finished: promptCompleted within the cap. Reply: send to promptCompleted (alone: one reply on its own server). Send: SendMessage's own latency, from sending it to its answer. Gap: between one reply's consecutive blockDelta events as received; ")
	fmt.Fprintf(w, "lag: receive time (once per socket read, before parsing) minus the event's createdAt (its insert); first delta: send to the first blockDelta (not a replayed one); resumes: streams reopened after ending before their reply did. ")
	fmt.Fprintf(w, "Commits/s: the database's xact_commit growth over the wall time (the server's and its workers', reads included; read once the server has stopped, as a backend reports its commits at most once a second and an idle one only at exit, so it includes the drain's few); write tx/s: transaction ids handed out over the run (every transaction that wrote), and in parentheses without the replies' SendMessages (the workers' claims and batches); connections: the most client backends of the server at once in pg_stat_activity, sampled every %v (walsenders in parentheses). ", chatSampleEvery)
	fmt.Fprintf(w, "Server CPU: over the replies, and in parentheses PostgreSQL's (its processes', over the same time); RSS: the process's peak (VmHWM).\n\n")
	fmt.Fprintln(w, "| feed | via | order | users | replies | finished | mean reply s (alone) | send p50 / p99 ms | first delta p50 / p99 ms | gap p50 / p99 / max ms | lag p50 / p99 ms | chars per delta | resumes | commits/s | write tx/s (workers) | connections | server CPU s (PostgreSQL) | server RSS MB | errors | server log |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %d | %.2f (%.2f) | %s / %s | %s / %s | %s / %s / %s | %s / %s | %s | %d | %.0f | %.0f (%.0f) | %d (%d) | %s (%s) | %s | %s | %s |\n",
			r.Feed, r.Via, orDash(r.Order), orDash(r.Users), r.Replies, r.Finished, r.MeanReplyS, r.AloneS, num(r.SendP50), num(r.SendP99),
			num(r.FirstDeltaP50), num(r.FirstDeltaP99), num(r.GapP50), num(r.GapP99), num(r.GapMax),
			num(r.LagP50), num(r.LagP99), num(r.CharsPerDelta), r.Resumes,
			r.CommitsPerS, r.WriteTxPerS, r.WorkerTxPerS, r.Connections, r.Walsenders, num(r.ServerCPUS), num(r.DBCPUS), num(r.ServerRSSMB), errorCounts(r.Errors), errorCounts(r.ServerLog))
	}
}

// orDash is s, or "–" when empty (a line of an older run).
func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

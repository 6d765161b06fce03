package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuSample is the CPU time (in ticks) the machine, this process and the
// private PostgreSQL had used at one moment. It is read from /proc; where
// there is none, every figure is zero and CPUShare reports nothing.
type cpuSample struct {
	ok                                  bool
	total, busy, self, clients, cluster float64
}

// CPUShare is how a measurement's wall time was spent, as fractions of the
// whole machine (all cores): by the bench's own process (the server under
// test, its hub probes and the writers), by its client processes, by the
// private PostgreSQL, and by every other process. A large Others means
// another program disturbed the figures.
type CPUShare struct {
	Server, Clients, Postgres, Others float64
	// Seconds is the CPU time of the server process.
	Seconds float64
	Known   bool
	// PostgresKnown is false with --database-url: PostgreSQL's time is
	// then in Others.
	PostgresKnown bool
}

func (m *Main) cpuNow() cpuSample {
	var s cpuSample
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return s
	}
	n := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v }
	// user nice system idle iowait irq softirq steal
	s.busy = n(1) + n(2) + n(3) + n(6) + n(7) + n(8)
	s.total = s.busy + n(4) + n(5)
	self, _, ok := procTimes("self")
	if !ok {
		return s
	}
	s.self, s.clients, s.ok = self, m.childTicks(), true
	if m.cluster != nil {
		s.cluster = clusterTimes(m.cluster.DataDir())
	}
	return s
}

// share splits the CPU used between a and b. A client process that ended
// in between counts in the server's time (as a reaped child), so measure
// while the clients run.
func (m *Main) share(a, b cpuSample) CPUShare {
	total := b.total - a.total
	if !a.ok || !b.ok || total <= 0 {
		return CPUShare{}
	}
	sh := CPUShare{
		Known:   true,
		Server:  (b.self - a.self) / total,
		Clients: max(0, b.clients-a.clients) / total,
		Seconds: (b.self - a.self) / userHZ,
	}
	busy := (b.busy - a.busy) / total
	if m.cluster != nil {
		sh.Postgres, sh.PostgresKnown = (b.cluster-a.cluster)/total, true
	}
	sh.Others = max(0, busy-sh.Server-sh.Clients-sh.Postgres)
	return sh
}

// userHZ is the unit of /proc's CPU times: ticks per second.
const userHZ = 100

// procTimes returns the CPU ticks of process pid (a number or "self"),
// including its reaped children, and its parent's pid.
func procTimes(pid string) (ticks float64, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, 0, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state ppid … utime(14) stime cutime cstime.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, 0, false
	}
	for _, k := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseFloat(f[k], 64)
		ticks += v
	}
	ppid, _ = strconv.Atoi(f[1])
	return ticks, ppid, true
}

// clusterTimes is the CPU ticks of the postmaster in dataDir and its live
// children (ended backends count in the postmaster's children's time).
func clusterTimes(dataDir string) float64 {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm := strings.TrimSpace(first)
	total, _, ok := procTimes(pm)
	if !ok {
		return 0
	}
	pmPID, _ := strconv.Atoi(pm)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if t, ppid, ok := procTimes(e.Name()); ok && ppid == pmPID {
			total += t
		}
	}
	return total
}

// awaitQuiet waits, at most QuietWait, until other processes use less than
// a tenth of the machine's CPU over one second.
func (m *Main) awaitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(m.Config.QuietWait)
	for time.Now().Before(deadline) {
		a := m.cpuNow()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		sh := m.share(a, m.cpuNow())
		if !sh.Known || sh.Others < 0.1 {
			return nil
		}
		m.Logger.Info("waiting for other processes to leave the CPU", "others", sh.Others)
	}
	if m.Config.QuietWait > 0 {
		m.Logger.Warn("other processes keep using the CPU; measuring anyway", "waited", m.Config.QuietWait)
	}
	return nil
}

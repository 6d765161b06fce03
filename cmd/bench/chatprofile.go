package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// chatProfile is what --chat-profile takes of one chat run: the server's
// CPU profile over a window from the send, and PostgreSQL's time per SQL
// function of schema convo over the whole run.
type chatProfile struct {
	prefix string // the files' prefix, with the run's name
	cpu    chan error
}

// startChatProfile turns on track_functions for the cluster (ALTER
// SYSTEM and a reload: every backend, the server's included, counts its
// calls from its next statement on). It needs the bench's own cluster.
func (m *Main) startChatProfile(ctx context.Context, name string) (*chatProfile, error) {
	if m.Config.ChatProfile == "" {
		return nil, nil
	}
	if m.cluster == nil {
		return nil, fmt.Errorf("--chat-profile needs the bench's own cluster (not --database-url)")
	}
	for _, q := range []string{`ALTER SYSTEM SET track_functions = 'all'`, `SELECT pg_reload_conf()`} {
		if _, err := m.pool.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("turn on track_functions: %w", err)
		}
	}
	return &chatProfile{prefix: m.Config.ChatProfile + "-" + name}, nil
}

// sent resets the function counts and starts the CPU profile: the
// messages are about to be sent.
func (p *chatProfile) sent(ctx context.Context, m *Main, adminURL string) error {
	if p == nil {
		return nil
	}
	if _, err := m.pool.Exec(ctx, `SELECT pg_stat_reset()`); err != nil {
		return fmt.Errorf("reset the function counts: %w", err)
	}
	p.cpu = make(chan error, 1)
	window := m.Config.ChatProfileWindow
	go func() {
		p.cpu <- fetchTo(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", adminURL, max(1, int(window.Seconds()))), p.prefix+".pprof")
	}()
	return nil
}

// finish waits for the CPU profile and writes the function table; call it
// once the server has stopped (a backend reports its counts when it exits).
func (p *chatProfile) finish(ctx context.Context, m *Main, replies int) error {
	if p == nil {
		return nil
	}
	if err := <-p.cpu; err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	rows, err := m.pool.Query(ctx, `SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions
		WHERE schemaname = 'convo' ORDER BY self_time DESC`)
	if err != nil {
		return fmt.Errorf("read pg_stat_user_functions: %w", err)
	}
	defer rows.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "PostgreSQL's time per SQL function (pg_stat_user_functions, track_functions 'all') over the run, per reply of %d\n\n", replies)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "function\tcalls per reply\ttotal ms per reply\tself ms per reply\tself ms per call\t")
	r := float64(replies)
	for rows.Next() {
		var name string
		var calls int64
		var total, self float64
		if err := rows.Scan(&name, &calls, &total, &self); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.3f\t%.3f\t%.3f\t\n", name, float64(calls)/r, total/r, self/r, self/float64(max(calls, 1)))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	tw.Flush()
	return os.WriteFile(p.prefix+"-functions.txt", []byte(b.String()), 0o644)
}

// fetchTo writes the body of a GET of url to path.
func fetchTo(ctx context.Context, url, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

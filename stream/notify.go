package stream

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// EventsChannel is the channel convo._append_event notifies, with payload
// '<conversation id>:<seq>' (or '<conversation id>:deleted').
const EventsChannel = "convo_events"

// NotifyFeed feeds a Hub from one dedicated LISTEN connection, opened from
// ConnConfig (not borrowed from a pool: it is held for the process's life).
type NotifyFeed struct {
	ConnConfig *pgx.ConnConfig
	Hub        *Hub
	Logger     *slog.Logger
	// PingInterval is how long the connection may stay silent before it is
	// pinged, to notice a half-open socket (default 15 s).
	PingInterval time.Duration

	connects atomic.Int64
}

// Connects counts successful (re)connections, for metrics and tests.
func (f *NotifyFeed) Connects() int64 { return f.connects.Load() }

// Run listens until ctx ends, reconnecting with backoff whenever the
// connection fails. After every connect it has the hub read every followed
// conversation again, since notifications sent while it was away are lost.
func (f *NotifyFeed) Run(ctx context.Context) {
	logger := f.Logger
	if logger == nil {
		logger = slog.Default()
	}
	b := newBackoff(100*time.Millisecond, 10*time.Second)
	for ctx.Err() == nil {
		err := f.session(ctx, b)
		if ctx.Err() != nil {
			return
		}
		delay := b.next()
		logger.Warn("stream: listener connection lost; reconnecting", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

func (f *NotifyFeed) session(ctx context.Context, b *backoff) error {
	conn, err := pgx.ConnectConfig(ctx, f.ConnConfig)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// LISTEN is one of the few statements sqlc cannot express.
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		return err
	}
	f.connects.Add(1)
	b.reset()
	f.Hub.Resync()

	interval := f.PingInterval
	if interval <= 0 {
		interval = 15 * time.Second
	}
	for {
		waitCtx, cancel := context.WithTimeout(ctx, interval)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			f.handle(n.Payload)
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

func (f *NotifyFeed) handle(payload string) {
	idText, seqText, ok := strings.Cut(payload, ":")
	id, err := uuid.Parse(idText)
	if !ok || err != nil {
		return
	}
	if seqText == "deleted" {
		f.Hub.Deleted(id)
		return
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil {
		return
	}
	f.Hub.Hint(id, seq)
}

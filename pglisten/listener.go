// Package pglisten holds a process's one LISTEN connection to PostgreSQL,
// shared by every channel the process listens on: the stream hub's
// (convo_events, package stream) and the workers' (convo_prompts, package
// worker).
//
// A notification is a hint, never the truth: PostgreSQL queues nothing for
// a listener that is disconnected, so whatever was sent while the
// connection was down is lost. Each channel therefore has a Ready hook,
// called after every (re)connect once its LISTEN holds, which reconciles
// from the durable state (the event log, the prompt queue).
//
// The connection is opened from a pgx.ConnConfig, not borrowed from a
// pool: it is held for the process's life. It is pinged when silent, so a
// half-open socket is noticed, and reopened with backoff and jitter when it
// fails. Channels may be added while it runs.
package pglisten

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/internal/backoff"
)

// ApplicationName is the listener connection's application_name, which
// pg_stat_activity shows, unless its ConnConfig names another.
const ApplicationName = "convo-listener"

// Handler receives one channel's notifications.
type Handler struct {
	// Notify receives each notification's payload, on the listener's
	// goroutine: it must return quickly and never block.
	Notify func(payload string)
	// Ready, if set, runs after every (re)connect, once LISTEN holds for
	// the channel, also on the listener's goroutine: notifications sent
	// before were not heard, so it looks at the durable state.
	Ready func()
}

// Options configures a Listener.
type Options struct {
	// ConnConfig opens the connection; it is copied.
	ConnConfig *pgx.ConnConfig
	Logger     *slog.Logger
	// PingInterval is how long the connection may stay silent before it
	// is pinged (default 15 s).
	PingInterval time.Duration
}

// Listener is the process's LISTEN connection. Create it with New, add
// channels with Listen (before or after Run), and Run it.
type Listener struct {
	opts Options

	mu       sync.Mutex
	handlers map[string][]Handler
	// added wakes the session to LISTEN on channels added while it waits.
	added chan struct{}

	connects atomic.Int64
}

// New returns a Listener that connects with opts.ConnConfig once Run is
// called.
func New(opts Options) *Listener {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 15 * time.Second
	}
	cfg := opts.ConnConfig.Copy()
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = ApplicationName
	}
	opts.ConnConfig = cfg
	return &Listener{opts: opts, handlers: make(map[string][]Handler), added: make(chan struct{}, 1)}
}

// Listen adds h to channel. A running listener LISTENs on a new channel at
// once and then calls h.Ready; either way h.Ready also runs after every
// later reconnect.
func (l *Listener) Listen(channel string, h Handler) {
	l.mu.Lock()
	l.handlers[channel] = append(l.handlers[channel], h)
	l.mu.Unlock()
	select {
	case l.added <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// Connects counts successful (re)connections, for metrics and tests.
func (l *Listener) Connects() int64 { return l.connects.Load() }

// Run listens until ctx ends, reconnecting with backoff whenever the
// connection fails.
func (l *Listener) Run(ctx context.Context) {
	b := backoff.New(100*time.Millisecond, 10*time.Second)
	for ctx.Err() == nil {
		err := l.session(ctx, b)
		if ctx.Err() != nil {
			return
		}
		delay := b.Next()
		l.opts.Logger.Warn("listener connection lost; reconnecting", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

// session is one connection's life: it returns when the connection fails
// (or ctx ends).
func (l *Listener) session(ctx context.Context, b *backoff.Backoff) error {
	conn, err := pgx.ConnectConfig(ctx, l.opts.ConnConfig)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	listening := map[string]int{} // channel → handlers made ready
	for first := true; ; first = false {
		ready, err := l.listenAll(ctx, conn, listening)
		if err != nil {
			return err
		}
		if first {
			l.connects.Add(1)
			b.Reset()
		}
		for _, f := range ready {
			f()
		}
		// A channel added while the connection waits interrupts the wait,
		// so that its LISTEN is not delayed until the next notification.
		added, interrupt := context.WithCancel(ctx)
		go func() {
			select {
			case <-l.added:
				interrupt()
			case <-added.Done():
			}
		}()
		err = l.wait(ctx, added, conn)
		interrupt()
		if err != nil {
			return err
		}
	}
}

// listenAll LISTENs on every channel not yet listened to on conn and
// returns the Ready hooks of the handlers not yet made ready.
func (l *Listener) listenAll(ctx context.Context, conn *pgx.Conn, listening map[string]int) ([]func(), error) {
	l.mu.Lock()
	var ready []func()
	var channels []string
	for channel, hs := range l.handlers {
		n, ok := listening[channel]
		if !ok {
			channels = append(channels, channel)
		}
		for _, h := range hs[n:] {
			if h.Ready != nil {
				ready = append(ready, h.Ready)
			}
		}
		listening[channel] = len(hs)
	}
	l.mu.Unlock()
	for _, channel := range channels {
		// LISTEN is one of the few statements sqlc cannot express.
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", channel, err)
		}
	}
	return ready, nil
}

// wait dispatches notifications until added ends (nil: a channel was
// added), the connection fails or ctx ends; a silent connection is pinged.
func (l *Listener) wait(ctx, added context.Context, conn *pgx.Conn) error {
	for {
		waitCtx, cancel := context.WithTimeout(added, l.opts.PingInterval)
		n, err := conn.WaitForNotification(waitCtx)
		timedOut := errors.Is(waitCtx.Err(), context.DeadlineExceeded)
		cancel()
		switch {
		case err == nil:
			l.dispatch(n.Channel, n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case added.Err() != nil:
			return nil
		case timedOut:
			pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		default:
			return err
		}
	}
}

func (l *Listener) dispatch(channel, payload string) {
	l.mu.Lock()
	hs := l.handlers[channel]
	l.mu.Unlock()
	for _, h := range hs {
		h.Notify(payload)
	}
}

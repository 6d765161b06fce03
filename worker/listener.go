package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// promptsChannel is the channel the SQL worker API notifies with
// "queued:<prompt id>" and "cancelled:<prompt id>".
const promptsChannel = "convo_prompts"

// listenSQL is the one statement of the runtime that sqlc cannot express.
const listenSQL = "LISTEN " + promptsChannel

// listener holds the process's one LISTEN connection, outside the pool. A
// notification is only a hint: the workers also poll, and the heartbeat
// catches a cancellation sent while the connection was down.
type listener struct {
	connConfig *pgx.ConnConfig
	log        *slog.Logger
	// pingInterval is how long the connection may stay silent before it is
	// pinged, to find a half-open connection.
	pingInterval time.Duration

	onReady     func() // after every (re)connect: look for missed prompts
	onQueued    func()
	onCancelled func(promptID uuid.UUID)
}

// connect opens the connection and listens.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.connConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if _, err := conn.Exec(ctx, listenSQL); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("listen on %s: %w", promptsChannel, err)
	}
	return conn, nil
}

// run listens on conn until ctx ends, reconnecting with backoff when the
// connection fails. It closes conn.
func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	backoff := 250 * time.Millisecond
	for {
		if conn != nil {
			err := l.listen(ctx, conn)
			conn.Close(context.WithoutCancel(ctx))
			conn = nil
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("prompt listener lost its connection; reconnecting", "err", err)
		}
		var err error
		if conn, err = l.connect(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			wait := backoff/2 + rand.N(backoff)
			l.log.Warn("prompt listener cannot connect; retrying", "err", err, "in", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		l.log.Info("prompt listener reconnected")
		l.onReady()
	}
}

// listen dispatches notifications until the connection fails or ctx ends.
func (l *listener) listen(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, l.pingInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			continue
		}
		kind, id, _ := strings.Cut(n.Payload, ":")
		switch kind {
		case "queued":
			l.onQueued()
		case "cancelled":
			if promptID, err := uuid.Parse(id); err == nil {
				l.onCancelled(promptID)
			}
		}
	}
}

package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/convo-dev/convo/internal/backoff"
)

// LogicalFeed feeds a Hub from logical replication instead of NOTIFY: one
// replication connection per process streams the publications of
// db/schema/00004_logical_feed.sql through pgoutput, and the hub gets every
// committed event row whole, in commit order (Hub.Deliver), and every
// deleted conversation (Hub.Deleted). Writers then need no NOTIFY (no
// cluster-wide lock at commit, no payload limit).
//
// Each connection creates its own temporary slot, which the server drops
// when the connection ends, so a crashed process leaves nothing behind.
// What committed while no slot existed is read from the event log: after
// every (re)connect the feed has the hub read every followed conversation
// again (Hub.Resync), and the hub tolerates repeats. The feed confirms what
// it has processed every StatusInterval, so the slot retains no WAL.
//
// The server needs wal_level=logical, and the role the REPLICATION
// attribute (or superuser); Check tells.
type LogicalFeed struct {
	// ConnConfig is the database to follow; the feed opens its own
	// replication connection from it.
	ConnConfig *pgx.ConnConfig
	Hub        Sink
	Logger     *slog.Logger
	// StatusInterval is how often the feed confirms the WAL position it has
	// processed and, when the server has been silent that long, asks it to
	// answer; a server silent for three intervals (at least 5 s) is taken
	// for gone and the feed reconnects (default 10 s).
	StatusInterval time.Duration

	connects atomic.Int64
	mu       sync.Mutex
	slot     string
}

// Connects counts successful (re)connections, for metrics and tests.
func (f *LogicalFeed) Connects() int64 { return f.connects.Load() }

// Slot returns the name of the replication slot the feed streams from
// now, or "" while it is not connected. Every connection has a new one.
func (f *LogicalFeed) Slot() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slot
}

func (f *LogicalFeed) setSlot(name string) {
	f.mu.Lock()
	f.slot = name
	f.mu.Unlock()
}

// Check connects once, the way Run does, and returns what would keep the
// feed from working, saying what to change: a server without
// wal_level=logical, a role that may not replicate, a database without the
// publications (not migrated). Run retries such failures forever; a server
// calls Check at start to fail instead.
func (f *LogicalFeed) Check(ctx context.Context) error {
	conn, err := connectReplication(ctx, f.ConnConfig)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return checkServer(ctx, conn)
}

// Run streams until ctx ends, reconnecting with backoff whenever the
// connection fails. After every connect it has the hub read every followed
// conversation again, since what committed while no slot existed is not in
// the new slot's stream.
func (f *LogicalFeed) Run(ctx context.Context) {
	logger := f.logger()
	b := backoff.New(100*time.Millisecond, 10*time.Second)
	for ctx.Err() == nil {
		err := f.session(ctx, b)
		if ctx.Err() != nil {
			return
		}
		delay := b.Next()
		logger.Warn("stream: replication connection lost; reconnecting", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}

func (f *LogicalFeed) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.Default()
	}
	return f.Logger
}

func (f *LogicalFeed) statusInterval() time.Duration {
	if f.StatusInterval <= 0 {
		return 10 * time.Second
	}
	return f.StatusInterval
}

// session runs one replication connection: a new temporary slot, a resync,
// then the stream until it fails or ctx ends.
func (f *LogicalFeed) session(ctx context.Context, b *backoff.Backoff) error {
	conn, err := connectReplication(ctx, f.ConnConfig)
	if err != nil {
		return err
	}
	defer func() {
		// Ending the connection drops the temporary slot.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	slot := newSlotName()
	start, err := createTemporarySlot(ctx, conn, slot)
	if err != nil {
		return err
	}
	if err := startStreaming(ctx, conn, slot, start); err != nil {
		return err
	}
	f.setSlot(slot)
	defer f.setSlot("")
	f.connects.Add(1)
	b.Reset()
	// The slot streams what commits from start on; the log has the rest.
	f.Hub.Resync()
	f.logger().Debug("stream: replication started", "slot", slot, "lsn", start)
	return f.stream(ctx, conn, start)
}

// stream receives the replication stream, hands each committed
// transaction to the hub, and confirms progress every status interval. It
// returns nil when ctx ends.
func (f *LogicalFeed) stream(ctx context.Context, conn *pgconn.PgConn, start pglogrepl.LSN) error {
	interval := f.statusInterval()
	silentLimit := max(3*interval, 5*time.Second)
	dec := newPgoutputDecoder()
	processed := start // everything before it is handled
	lastHeard := time.Now()
	var nextStatus time.Time
	for {
		if now := time.Now(); !now.Before(nextStatus) {
			silent := now.Sub(lastHeard)
			if silent > silentLimit {
				return fmt.Errorf("no message from the server for %s", silent.Round(time.Millisecond))
			}
			if err := confirm(ctx, conn, processed, silent >= interval); err != nil {
				return err
			}
			nextStatus = now.Add(interval)
		}
		receiveCtx, cancel := context.WithDeadline(ctx, nextStatus)
		msg, err := conn.ReceiveMessage(receiveCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case pgconn.Timeout(err):
			continue // time to confirm
		case err != nil:
			return fmt.Errorf("receive replication message: %w", err)
		}
		lastHeard = time.Now()

		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("parse keepalive: %w", err)
				}
				// Between transactions, everything the server has sent is
				// handled: WAL of other databases need not be kept either.
				if !dec.inTransaction() && ka.ServerWALEnd > processed {
					processed = ka.ServerWALEnd
				}
				if ka.ReplyRequested {
					nextStatus = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("parse WAL data: %w", err)
				}
				tx, err := dec.decode(xld.WALData)
				if err != nil {
					return fmt.Errorf("decode WAL at %s: %w", xld.WALStart, err)
				}
				if tx != nil {
					f.commit(tx)
					processed = max(processed, tx.end)
				}
			}
		case *pgproto3.ErrorResponse:
			return pgconn.ErrorResponseToPgError(msg)
		case *pgproto3.CopyDone:
			return errors.New("the server ended replication")
		}
	}
}

// commit hands one committed transaction to the hub: its events, then its
// deletions (a transaction that deletes a conversation writes no event to
// it afterwards).
func (f *LogicalFeed) commit(tx *walTx) {
	if len(tx.events) > 0 {
		f.Hub.Deliver(tx.events)
	}
	for _, row := range tx.unreadable {
		f.logger().Warn("stream: an event row in the WAL could not be decoded; reading the conversation from the log",
			"conversation_id", row.conversationID, "err", row.err)
		f.Hub.Hint(row.conversationID, 0)
	}
	for _, id := range tx.deleted {
		f.Hub.Deleted(id)
	}
}

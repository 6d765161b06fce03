package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/postgres/dbq"
)

// target is where streamed text goes: a block's deltas or a tool call's
// progress output.
type target struct {
	toolCall bool
	id       uuid.UUID
}

// pending is text streamed to a target and not written yet.
type pending struct {
	buf       strings.Builder
	lastWrite time.Time
	// appends numbers the target's append_block calls (delta_seq), so a
	// call retried after a lost reply is applied once.
	appends int32
}

// writer performs every SQL write of one prompt, one call at a time and in
// order, each call its own transaction. Streamed text (block deltas, tool
// progress) is coalesced: per target, a write at least interval after the
// previous one ended, or sooner once maxBytes are waiting; the first text
// after a quiet spell is written at once, so a slow model is not delayed.
// The written text is exactly the concatenation of what was streamed.
//
// Once the prompt's context ends (cancelled, lease lost, shutting down) or
// a write fails, the writer writes nothing more: every method returns the
// reason.
type writer struct {
	api      sqlAPI
	promptID uuid.UUID
	// stop ends when the worker must stop writing for this prompt.
	stop context.Context
	// fail stops the prompt when a background write fails.
	fail func(error)
	// callTimeout bounds each SQL call; calls are not cancelled with stop,
	// so a call in flight finishes instead of breaking its connection.
	callTimeout time.Duration
	interval    time.Duration // < 0: write every chunk at once
	maxBytes    int

	mu      sync.Mutex
	err     error // sticky: the first failure
	pending map[target]*pending
	order   []target // targets in the order they first got text
	deltas  int      // append_block and tool_call_progress calls
	kick    chan struct{}
	done    chan struct{}
	exited  chan struct{}
}

func newWriter(stop context.Context, fail func(error), api sqlAPI, promptID uuid.UUID, cfg *Config) *writer {
	w := &writer{
		api: api, promptID: promptID, stop: stop, fail: fail,
		callTimeout: cfg.CallTimeout, interval: cfg.BatchInterval, maxBytes: cfg.BatchBytes,
		pending: map[target]*pending{},
		kick:    make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{}),
	}
	go w.flusher()
	return w
}

// call runs one SQL call, unless the writer has stopped. The caller holds
// w.mu.
func (w *writer) call(what string, fn func(ctx context.Context) error) error {
	if w.err != nil {
		return w.err
	}
	if w.stop.Err() != nil {
		w.err = context.Cause(w.stop)
		return w.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.stop), w.callTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		w.err = &writeError{what: what, err: err}
		return w.err
	}
	return nil
}

// startBlock opens a block and returns its id.
func (w *writer) startBlock(blockType string, metadata map[string]any) (uuid.UUID, error) {
	meta, err := marshalObject(metadata)
	if err != nil {
		return uuid.Nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var id uuid.UUID
	err = w.call("start "+blockType+" block", func(ctx context.Context) error {
		var err error
		id, err = w.api.BlockStart(ctx, dbq.BlockStartParams{PromptID: w.promptID, BlockType: blockType, Metadata: meta})
		return err
	})
	return id, err
}

// appendText streams text to t, writing it now or later (see writer).
func (w *writer) appendText(t target, text string) error {
	if text == "" {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	p := w.pending[t]
	if p == nil {
		p = &pending{}
		w.pending[t] = p
		w.order = append(w.order, t)
	}
	p.buf.WriteString(text)
	if w.interval < 0 || p.buf.Len() >= w.maxBytes || time.Since(p.lastWrite) >= w.interval {
		return w.flushLocked(t, p)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return nil
}

// flushLocked writes what is pending for t. The caller holds w.mu.
func (w *writer) flushLocked(t target, p *pending) error {
	if p.buf.Len() == 0 {
		return nil
	}
	text := p.buf.String()
	p.buf.Reset()
	w.deltas++
	// The interval counts from the end of the write, so that text gathers
	// while PostgreSQL is slow instead of each chunk after a slow write
	// being written on its own.
	defer func() { p.lastWrite = time.Now() }()
	if t.toolCall {
		return w.call("write tool call output", func(ctx context.Context) error {
			return w.api.ToolCallProgress(ctx, dbq.ToolCallProgressParams{ToolCallID: t.id, Output: text})
		})
	}
	p.appends++
	seq := p.appends
	return w.callRetrying("append to block", func(ctx context.Context) error {
		return w.api.BlockAppend(ctx, dbq.BlockAppendParams{BlockID: t.id, Delta: text, DeltaSeq: &seq})
	})
}

// appendAttempts bounds the tries of one append (within the call timeout).
const appendAttempts = 5

// callRetrying is call for a write that is safe to repeat. When the
// connection fails during the call, the reply may have been lost after the
// commit, so it tries again, with backoff; the repeat is a no-op if the
// first try was applied. Errors from PostgreSQL itself are not retried.
func (w *writer) callRetrying(what string, fn func(ctx context.Context) error) error {
	return w.call(what, func(ctx context.Context) error {
		delay := 20 * time.Millisecond
		for attempt := 1; ; attempt++ {
			err := fn(ctx)
			if err == nil || attempt == appendAttempts || !connectionLost(err) || ctx.Err() != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(delay):
			}
			delay *= 2
		}
	})
}

// connectionLost reports whether err came from the connection rather than
// from PostgreSQL's answer.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// flushTarget writes what is pending for t. The caller holds w.mu.
func (w *writer) flushTarget(t target) error {
	if p := w.pending[t]; p != nil {
		return w.flushLocked(t, p)
	}
	return nil
}

// flushAll writes everything pending, in the order the targets started.
func (w *writer) flushAll() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.order {
		if err := w.flushTarget(t); err != nil {
			return err
		}
	}
	return nil
}

// endBlock writes the block's pending text and ends it with metadata.
func (w *writer) endBlock(blockID uuid.UUID, metadata map[string]any) error {
	meta, err := marshalObject(metadata)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushTarget(target{id: blockID}); err != nil {
		return err
	}
	return w.call("end block", func(ctx context.Context) error {
		return w.api.BlockEnd(ctx, dbq.BlockEndParams{BlockID: blockID, Metadata: meta})
	})
}

// startToolCall records a call of name with input on a tool_use block.
func (w *writer) startToolCall(blockID uuid.UUID, name string, input []byte) (uuid.UUID, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var id uuid.UUID
	err := w.call("start tool call", func(ctx context.Context) error {
		var err error
		id, err = w.api.ToolCallStart(ctx, dbq.ToolCallStartParams{BlockID: blockID, Name: name, Input: input})
		return err
	})
	return id, err
}

// endToolCall writes the call's pending output, then completes it with a
// final chunk of output, or fails it when errText is not empty.
func (w *writer) endToolCall(callID uuid.UUID, output, errText string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushTarget(target{toolCall: true, id: callID}); err != nil {
		return err
	}
	if errText != "" {
		return w.call("fail tool call", func(ctx context.Context) error {
			return w.api.ToolCallFail(ctx, dbq.ToolCallFailParams{ToolCallID: callID, Error: errText})
		})
	}
	var out *string
	if output != "" {
		out = &output
	}
	return w.call("complete tool call", func(ctx context.Context) error {
		return w.api.ToolCallComplete(ctx, dbq.ToolCallCompleteParams{ToolCallID: callID, Output: out})
	})
}

// completePrompt writes everything pending and completes the prompt.
func (w *writer) completePrompt() error {
	if err := w.flushAll(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.call("complete prompt", func(ctx context.Context) error {
		return w.api.PromptComplete(ctx, w.promptID)
	})
}

// deltaCount is the number of append_block and tool_call_progress calls.
func (w *writer) deltaCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deltas
}

// close stops the background flusher; pending text is dropped.
func (w *writer) close() {
	close(w.done)
	<-w.exited
}

// flusher writes pending text whose interval has passed, for a model that
// paused after a burst.
func (w *writer) flusher() {
	defer close(w.exited)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		var next time.Time
		for _, p := range w.pending {
			if p.buf.Len() > 0 {
				if due := p.lastWrite.Add(w.interval); next.IsZero() || due.Before(next) {
					next = due
				}
			}
		}
		w.mu.Unlock()
		var fire <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			fire = timer.C
		}
		select {
		case <-w.done:
			return
		case <-w.stop.Done():
			return
		case <-w.kick:
		case <-fire:
			if err := w.flushDue(); err != nil {
				w.fail(err)
				return
			}
		}
	}
}

// flushDue writes the pending text whose interval has passed.
func (w *writer) flushDue() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for _, t := range w.order {
		p := w.pending[t]
		if p.buf.Len() > 0 && now.Sub(p.lastWrite) >= w.interval {
			if err := w.flushLocked(t, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeError is a failed SQL call of the worker API.
type writeError struct {
	what string
	err  error
}

func (e *writeError) Error() string { return fmt.Sprintf("%s: %s", e.what, sqlMessage(e.err)) }
func (e *writeError) Unwrap() error { return e.err }

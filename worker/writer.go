package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/firstdelta"
)

// target is where streamed text goes: a block's deltas or a tool call's
// progress output.
type target struct {
	toolCall bool
	id       uuid.UUID
}

// The kinds of op of convo.write_batch (db/functions/batch.sql).
const (
	opStartPrompt      = "start_prompt"
	opStartBlock       = "start_block"
	opAppend           = "append"
	opEndBlock         = "end_block"
	opStartToolCall    = "start_tool_call"
	opToolProgress     = "tool_progress"
	opCompleteToolCall = "complete_tool_call"
	opFailToolCall     = "fail_tool_call"
	opRequestInput     = "request_input"
	opWaitPrompt       = "wait_prompt"
	opCompletePrompt   = "complete_prompt"
)

// op is one call of the worker API that a writer queued.
type op struct {
	kind     string
	block    uuid.UUID // start_block, append, end_block, start_tool_call
	toolCall uuid.UUID // start_tool_call, tool_progress, complete/fail_tool_call
	text     []byte    // append, tool_progress: coalesced text
	seq      int32     // append: the block's append number, set when taken
	// blockType, metadata, name, input, output, errText: the op's other
	// fields (see wireOp).
	blockType string
	metadata  json.RawMessage
	name      string
	input     json.RawMessage
	output    *string
	errText   string
	// inputKind, request and expiresAt: request_input's kind, request and
	// expiry (nil: never).
	inputKind string
	request   json.RawMessage
	expiresAt *time.Time
	// usage is complete_prompt's usage (nil: none reported).
	usage json.RawMessage
}

// wireOp is an op as write_batch reads it.
type wireOp struct {
	Op       string          `json:"op"`
	Prompt   uuid.UUID       `json:"prompt"`
	Block    *uuid.UUID      `json:"block,omitempty"`
	ToolCall *uuid.UUID      `json:"toolCall,omitempty"`
	Text     *string         `json:"text,omitempty"`
	Seq      int32           `json:"seq,omitempty"`
	Type     string          `json:"type,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Name     string          `json:"name,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Output   *string         `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	Kind     string          `json:"kind,omitempty"`
	Request  json.RawMessage `json:"request,omitempty"`
	// ExpiresAt marshals as RFC 3339 with nanoseconds, which write_batch
	// reads as a timestamptz.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Usage is complete_prompt's token usage.
	Usage json.RawMessage `json:"usage,omitempty"`
}

func (o *op) wire(prompt uuid.UUID) wireOp {
	w := wireOp{Op: o.kind, Prompt: prompt, Seq: o.seq, Type: o.blockType, Metadata: o.metadata,
		Name: o.name, Input: o.input, Output: o.output, Error: o.errText, Kind: o.inputKind, Request: o.request,
		ExpiresAt: o.expiresAt, Usage: o.usage}
	if o.block != uuid.Nil {
		w.Block = &o.block
	}
	if o.toolCall != uuid.Nil {
		w.ToolCall = &o.toolCall
	}
	if o.kind == opAppend || o.kind == opToolProgress {
		text := string(o.text)
		w.Text = &text
	}
	return w
}

// cost is the op's weight in a batch's budget, in appends: starting and
// ending a prompt write several events and rows, a block or tool call a
// few.
func (o *op) cost() int {
	switch o.kind {
	case opAppend, opToolProgress:
		return 1
	case opStartPrompt:
		return 12
	case opCompletePrompt, opWaitPrompt:
		return 20
	}
	return 4
}

// describe says what the op was doing, for errors.
func (o *op) describe() string {
	switch o.kind {
	case opStartPrompt:
		return "start prompt"
	case opStartBlock:
		return "start " + o.blockType + " block"
	case opAppend:
		return "append to block"
	case opEndBlock:
		return "end block"
	case opStartToolCall:
		return "start tool call"
	case opToolProgress:
		return "write tool call output"
	case opCompleteToolCall:
		return "complete tool call"
	case opFailToolCall:
		return "fail tool call"
	case opCompletePrompt:
		return "complete prompt"
	case opRequestInput:
		return "request " + o.inputKind + " input"
	case opWaitPrompt:
		return "wait for input"
	}
	return o.kind
}

// writer queues the SQL writes of one prompt for the pool's committer,
// which writes them in order, in batches shared with the other prompts.
// Its methods return at once (ids of new blocks and tool calls are made
// here); sync waits until what was queued is written. Streamed text (block
// deltas, tool progress) is coalesced: text for the target of the last
// queued op joins it, so a batch carries one delta per block however many
// chunks the model produced since the last one. The written text is
// exactly the concatenation of what was streamed.
//
// Once the prompt's context ends (cancelled, lease lost, shutting down) or
// a write fails, the writer writes nothing more: what is queued is dropped
// and every method returns the reason.
type writer struct {
	c *committer
	// u is the pool's urgent lane (nil: none): it writes the writer's
	// start and first text when they are due, in small batches, while
	// c may be writing a batch of other replies' text.
	u        *committer
	promptID uuid.UUID
	// stop ends when the worker must stop writing for this prompt.
	stop context.Context
	// fail stops the prompt when a write fails.
	fail     func(error)
	coalesce bool // BatchInterval >= 0
	maxBytes int

	mu       sync.Mutex
	err      error // sticky: the first failure
	queued   []*op
	bytes    int                 // text bytes queued
	appends  map[uuid.UUID]int32 // per block: appends taken (delta_seq)
	enqueued int                 // ops ever queued
	done     int                 // ops written or dropped
	changed  chan struct{}       // closed when done or err changes
	started  bool                // start_prompt was written
	wrote    bool                // some text was queued
	// hot: a start or the first text is queued (the urgent lane takes
	// only such writers). inFlight: some of its ops are in a batch not
	// yet answered; no other lane takes its ops meanwhile, so that they
	// are applied in order, through one lane at a time.
	hot      bool
	inFlight bool
	since    time.Time // when the oldest queued op was queued
	deltas   int       // append and tool_progress ops written
}

// newWriter returns a writer for promptID, which was claimed (its lease
// set) just now, written by c and, for its start and first text, by the
// urgent lane u when not nil.
func newWriter(stop context.Context, fail func(error), c, u *committer, promptID uuid.UUID) (*writer, error) {
	w := &writer{
		c: c, u: u, promptID: promptID, stop: stop, fail: fail,
		coalesce: c.cfg.BatchInterval >= 0, maxBytes: c.cfg.BatchBytes,
		appends: map[uuid.UUID]int32{}, changed: make(chan struct{}),
	}
	if err := c.register(w); err != nil {
		return nil, err
	}
	if u != nil {
		if err := u.register(w); err != nil {
			c.unregister(w)
			return nil, err
		}
	}
	return w, nil
}

// kick tells the committers that ops are queued: the writer's lane, and
// the urgent lane when the writer is hot.
func (w *writer) kick(urgent, hot bool) {
	w.c.queued(urgent)
	if hot && w.u != nil {
		w.u.queued(true)
	}
}

// enqueue queues o, unless the writer has stopped.
func (w *writer) enqueue(o *op, urgent bool) error {
	w.mu.Lock()
	if err := w.checkLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	w.pushLocked(o)
	w.mu.Unlock()
	w.c.queued(urgent)
	return nil
}

// pushLocked queues o. The caller holds w.mu.
func (w *writer) pushLocked(o *op) {
	if len(w.queued) == 0 {
		w.since = time.Now()
	}
	w.queued = append(w.queued, o)
	w.enqueued++
}

// waitingSince is when the oldest op still queued was queued; a writer
// with none sorts last.
func (w *writer) waitingSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queued) == 0 {
		return time.Now().Add(time.Hour)
	}
	return w.since
}

// checkLocked returns why the writer stopped, if it has. The caller holds
// w.mu.
func (w *writer) checkLocked() error {
	if w.err == nil && w.stop.Err() != nil {
		w.stopLocked(context.Cause(w.stop))
	}
	return w.err
}

// stopLocked records err and drops what is queued. The caller holds w.mu.
func (w *writer) stopLocked(err error) {
	if w.err == nil {
		w.err = err
	}
	w.done += len(w.queued)
	w.queued, w.bytes = nil, 0
	w.changedLocked()
}

func (w *writer) changedLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// start queues start_prompt, which makes the writer hot.
func (w *writer) start() error {
	w.mu.Lock()
	if err := w.checkLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	w.pushLocked(&op{kind: opStartPrompt})
	w.hot = true
	w.mu.Unlock()
	w.kick(true, true)
	return nil
}

// startBlock queues a new block and returns its id.
func (w *writer) startBlock(blockType string, metadata map[string]any) (uuid.UUID, error) {
	meta, err := marshalObject(metadata)
	if err != nil {
		return uuid.Nil, err
	}
	id := uuid.New()
	return id, w.enqueue(&op{kind: opStartBlock, block: id, blockType: blockType, metadata: meta}, false)
}

// appendText streams text to t.
func (w *writer) appendText(t target, text string) error {
	if text == "" {
		return nil
	}
	w.mu.Lock()
	if err := w.checkLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	// The first text of the reply goes out at once: a reader waits for it.
	urgent := !w.wrote
	if urgent && firstdelta.On() {
		firstdelta.Mark(w.promptID, firstdelta.Produced, time.Now())
	}
	hot := urgent
	w.hot = w.hot || hot
	w.wrote = true
	w.bytes += len(text)
	if w.bytes >= w.maxBytes {
		urgent = true
	}
	if n := len(w.queued); w.coalesce && n > 0 && w.queued[n-1].appendsTo(t) {
		w.queued[n-1].text = append(w.queued[n-1].text, text...)
		w.mu.Unlock()
		if urgent {
			w.kick(true, hot)
		}
		return nil
	}
	o := &op{kind: opAppend, block: t.id, text: []byte(text)}
	if t.toolCall {
		o = &op{kind: opToolProgress, toolCall: t.id, text: []byte(text)}
	}
	w.pushLocked(o)
	w.mu.Unlock()
	w.kick(urgent, hot)
	return nil
}

func (o *op) appendsTo(t target) bool {
	if t.toolCall {
		return o.kind == opToolProgress && o.toolCall == t.id
	}
	return o.kind == opAppend && o.block == t.id
}

// endBlock queues the end of a block, with metadata.
func (w *writer) endBlock(blockID uuid.UUID, metadata map[string]any) error {
	meta, err := marshalObject(metadata)
	if err != nil {
		return err
	}
	return w.enqueue(&op{kind: opEndBlock, block: blockID, metadata: meta}, false)
}

// startToolCall queues a call of name with input on a tool_use block and
// returns its id.
func (w *writer) startToolCall(blockID uuid.UUID, name string, input []byte) (uuid.UUID, error) {
	id := uuid.New()
	return id, w.enqueue(&op{kind: opStartToolCall, block: blockID, toolCall: id, name: name, input: input}, false)
}

// endToolCall queues the end of a tool call: completed with a final chunk
// of output, or failed when errText is not empty.
func (w *writer) endToolCall(callID uuid.UUID, output, errText string) error {
	if errText != "" {
		return w.enqueue(&op{kind: opFailToolCall, toolCall: callID, errText: errText}, false)
	}
	var out *string
	if output != "" {
		out = &output
	}
	return w.enqueue(&op{kind: opCompleteToolCall, toolCall: callID, output: out}, false)
}

// pausedCall is a tool call that waits for a person: the runtime records
// it (start_tool_call on its tool_use block), asks for input on it, and
// ends the block, all in the batch that parks the prompt.
type pausedCall struct {
	blockID, toolCallID uuid.UUID
	name                string
	input               json.RawMessage
	blockMeta           json.RawMessage
	kind                string
	request             json.RawMessage
	expiresAt           *time.Time
}

// wait queues the paused calls, each with its input request, and
// wait_prompt, as one run of ops that no batch splits: wait_prompt
// commits with the requests, before any answer can come, so it always
// parks the prompt. It returns once they are written.
func (w *writer) wait(calls []pausedCall) error {
	ops := make([]*op, 0, 3*len(calls)+1)
	for _, c := range calls {
		ops = append(ops,
			&op{kind: opStartToolCall, block: c.blockID, toolCall: c.toolCallID, name: c.name, input: c.input},
			&op{kind: opRequestInput, toolCall: c.toolCallID, inputKind: c.kind, request: c.request, expiresAt: c.expiresAt},
			&op{kind: opEndBlock, block: c.blockID, metadata: c.blockMeta})
	}
	ops = append(ops, &op{kind: opWaitPrompt})
	w.mu.Lock()
	if err := w.checkLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	for _, o := range ops {
		w.pushLocked(o)
	}
	w.mu.Unlock()
	w.c.queued(true)
	return w.sync()
}

// completePrompt queues the completion of the prompt, with the token
// usage its model reported (nil: none), and waits until it is written.
func (w *writer) completePrompt(usage json.RawMessage) error {
	if err := w.enqueue(&op{kind: opCompletePrompt, usage: usage}, true); err != nil {
		return err
	}
	return w.sync()
}

// flushAll waits until everything queued is written.
func (w *writer) flushAll() error { return w.sync() }

// sync waits until every op queued so far is written (or dropped), and
// returns the writer's error. A stop of the prompt drops what is still
// queued; ops already in a batch are waited for.
func (w *writer) sync() error {
	w.mu.Lock()
	want := w.enqueued
	for w.done < want {
		changed := w.changed
		w.mu.Unlock()
		w.c.queued(true)
		select {
		case <-changed:
		case <-w.stop.Done():
			w.mu.Lock()
			_ = w.checkLocked()
			w.mu.Unlock()
			<-changed
		}
		w.mu.Lock()
	}
	err := w.err
	w.mu.Unlock()
	return err
}

// hasQueued reports whether ops wait to be taken (by hot: by the urgent
// lane).
func (w *writer) hasQueued(hot bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queued) > 0 && !w.inFlight && (w.hot || !hot)
}

// isHot reports whether a start or a first text is queued.
func (w *writer) isHot() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hot
}

// isStarted reports whether start_prompt was written.
func (w *writer) isStarted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started
}

// deltaCount is the number of append and tool_progress ops written.
func (w *writer) deltaCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deltas
}

// close drops what is queued and leaves the committers.
func (w *writer) close() {
	w.abandon(errSettled)
	w.c.unregister(w)
	if w.u != nil {
		w.u.unregister(w)
	}
}

// abandon stops the writer with err, dropping what is queued.
func (w *writer) abandon(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopLocked(err)
}

// take hands a committer the queued ops, numbering appends, and says
// whether a start or the first text is among them; hot: only if one is
// (the urgent lane). A
// stopped writer gives nothing, nor one whose ops are in a batch not yet
// answered (on another lane).
func (w *writer) take(hot bool) (ops []*op, wasHot bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checkLocked() != nil || w.inFlight || (hot && !w.hot) || len(w.queued) == 0 {
		return nil, false
	}
	ops, wasHot = w.queued, w.hot
	w.queued, w.bytes = nil, 0
	w.inFlight, w.hot = true, false
	for _, o := range ops {
		if o.kind == opAppend {
			w.appends[o.block]++
			o.seq = w.appends[o.block]
		}
	}
	return ops, wasHot
}

// settled records the fate of ops the committer took: the first applied
// were written, the rest were not, for err.
func (w *writer) settled(ops []*op, applied int, err error) {
	w.mu.Lock()
	w.inFlight = false
	w.done += len(ops)
	for _, o := range ops[:applied] {
		switch o.kind {
		case opStartPrompt:
			w.started = true
			if firstdelta.On() {
				firstdelta.Mark(w.promptID, firstdelta.Started, time.Now())
			}
		case opAppend, opToolProgress:
			w.deltas++
		}
	}
	if err != nil {
		w.stopLocked(err)
	} else {
		w.changedLocked()
	}
	// What was queued while these ops were in flight was left by every
	// lane: it is due now.
	more, hot := err == nil && len(w.queued) > 0, w.hot
	w.mu.Unlock()
	if err != nil {
		w.fail(err)
	}
	if more {
		w.kick(hot, hot)
	}
}

// writeError is a failed SQL call of the worker API.
type writeError struct {
	what string
	err  error
}

func (e *writeError) Error() string { return fmt.Sprintf("%s: %s", e.what, sqlMessage(e.err)) }
func (e *writeError) Unwrap() error { return e.err }

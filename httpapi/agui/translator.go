package agui

import (
	"fmt"
	"strings"
	"time"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
	"github.com/convo-dev/convo/wire/view"
)

// translator turns a conversation's stream (a snapshot, then its events)
// into AG-UI events: a sequence of runs, one per prompt. A run starts
// (RUN_STARTED, then MESSAGES_SNAPSHOT of the conversation as it stands)
// when its prompt is queued, or at once for a prompt already active when
// the stream starts; it carries the events of its prompt's blocks and tool
// calls, and ends with RUN_FINISHED or RUN_ERROR when the prompt ends.
// Runs never overlap: the events of a prompt that starts while another's
// run is open wait, in order, for their own run.
//
// It is not safe for concurrent use.
type translator struct {
	threadID string
	conv     *view.Conversation
	// queued names the blocks whose changes wait in a deferred run's
	// queue: they reach the client then, so no snapshot may hold them
	// before.
	queued map[string]bool
	// target, when set, is the one prompt the stream runs (POST /v1/agui),
	// under the run id targetRun: other prompts' events only update the
	// thread, and the stream is done when the target's run ends. Empty:
	// every prompt is a run, in turn.
	target, targetRun string
	done              bool

	run      *openRun
	waiting  []*waitingRun
	finished map[string]bool // prompts whose run ended

	out []any
	now func() time.Time
}

// openRun is the open run: one prompt's.
type openRun struct {
	id, promptID, messageID string
	blocks                  map[string]*runBlock // by block id
	order                   []*runBlock          // in start order
	calls                   map[string]*runBlock // tool_use blocks by tool call id
	// asks are the input requests of the run's tool calls, in order.
	asks []*convov1.InputRequest
}

// runBlock is what a run has sent of one block.
type runBlock struct {
	id, typ, messageID string
	kind               blockKind
	open               bool            // text, reasoning: started, not yet ended
	content            strings.Builder // other kinds: for the CUSTOM event at the end
	// tool_use blocks.
	name                      string // from the block's metadata, until the call names it
	callID                    string // the toolCallId TOOL_CALL_START used
	started, ended, fromInput bool
	args                      strings.Builder // argument deltas before TOOL_CALL_START
}

// waitingRun is a prompt whose run waits for the open one to end, with its
// changes so far.
type waitingRun struct {
	promptID string
	queue    []view.Change
}

// newTranslator starts from a stream's snapshot. target, when set, is the
// only prompt to run, as run runID.
func newTranslator(threadID string, snap *convov1.Snapshot, target, runID string) *translator {
	return &translator{
		threadID: threadID, conv: view.New(snap), queued: map[string]bool{}, target: target, targetRun: runID,
		finished: map[string]bool{}, now: time.Now,
	}
}

// begin returns the stream's first events: following every prompt, the
// run of the first prompt already active (the others wait for theirs).
func (t *translator) begin() []any {
	if t.target == "" {
		for _, m := range t.conv.Unfinished() {
			if t.run == nil {
				t.startRun(m.PromptID, m.ID, t.now())
			} else {
				t.waiting = append(t.waiting, &waitingRun{promptID: m.PromptID})
			}
		}
	}
	return t.flush()
}

// apply takes the stream's next event (replayed or live) and returns the
// AG-UI events it makes.
func (t *translator) apply(ev *convov1.Event) []any {
	for _, c := range t.conv.Read(ev) {
		t.change(c)
	}
	t.drain()
	return t.flush()
}

// change takes one change of the conversation: the thread's state takes
// every change; a change of a prompt (see runPrompt) goes to its run,
// opening it when no other is open, or waits with its prompt's others.
func (t *translator) change(c view.Change) {
	if s, ok := c.(view.PathSwitched); ok {
		t.conv.Apply(c)
		t.branchSwitched(s)
		return
	}
	promptID := runPrompt(c)
	switch {
	case promptID == "" || t.finished[promptID] || t.done:
		t.conv.Apply(c)
	case t.run != nil && t.run.promptID == promptID:
		t.conv.Apply(c)
		t.translate(c)
	case t.target != "":
		if promptID == t.target && t.run == nil {
			t.startRun(promptID, t.messageOf(c, promptID), t.timeOf(c))
			t.conv.Apply(c)
			t.translate(c)
		} else {
			t.conv.Apply(c)
		}
	default:
		w := t.waitingFor(promptID)
		if w == nil && t.run == nil {
			// The snapshot is taken before the change is applied: what
			// it adds reaches the client as this run's events.
			t.startRun(promptID, t.messageOf(c, promptID), t.timeOf(c))
			t.conv.Apply(c)
			t.translate(c)
			break
		}
		if w == nil {
			w = &waitingRun{promptID: promptID}
			t.waiting = append(t.waiting, w)
		}
		w.push(c)
		if s, ok := c.(view.BlockStarted); ok && t.conv.Block(s.BlockID) == nil {
			t.conv.Apply(c)
			if t.conv.Block(s.BlockID) != nil {
				t.queued[s.BlockID] = true
			}
			break
		}
		t.conv.Apply(c)
	}
}

// branchSwitched shows a change of the active path (already folded into
// the thread) as AG-UI can: AG-UI has no event for it, but a
// MESSAGES_SNAPSHOT replaces the client's messages with the thread's (its
// reducer keeps the messages the snapshot names, drops the others and
// appends the new ones). An edit or a regeneration queues a prompt in
// the same transaction (its promptQueued is next), and that prompt's run
// starts with the snapshot of the new path. A switch queues none: it is
// a run of its own, RUN_STARTED (run id "branch-<seq>", metadata.convo
// the fork and the new leaf), MESSAGES_SNAPSHOT, RUN_FINISHED, because
// AG-UI allows nothing between runs. A stream that runs one prompt
// shows none (its run's snapshot has the path; no switch happens while
// its prompt is unfinished).
func (t *translator) branchSwitched(c view.PathSwitched) {
	s := c.Switch
	var leaf *convov1.Message
	for _, m := range s.GetMessages() {
		if m.GetId() == s.GetLeafMessageId() {
			leaf = m
		}
	}
	ms := t.timeOf(c).UnixMilli()
	switch {
	case t.target != "" || t.done:
	case t.run != nil:
		// Not written while a prompt is unfinished; should one come, the
		// open run shows it.
		t.emit(&messagesSnapshotEvent{Type: messagesSnapshot, Timestamp: ms, Messages: messagesOf(t.conv, t.queued)})
	case leaf != nil && leaf.GetPromptId() != "" && leaf.GetStatus() == "pending":
		// An edit's or a regeneration's: its prompt's run is next.
	default:
		runID := fmt.Sprintf("branch-%d", c.Seq())
		meta := map[string]string{"leafMessageId": s.GetLeafMessageId()}
		if s.GetForkMessageId() != "" {
			meta["forkMessageId"] = s.GetForkMessageId()
		}
		t.emit(&runStartedEvent{Type: runStarted, Timestamp: ms, ThreadID: t.threadID, RunID: runID, Metadata: convoMeta(meta)})
		t.emit(&messagesSnapshotEvent{Type: messagesSnapshot, Timestamp: ms, Messages: messagesOf(t.conv, t.queued)})
		t.emit(&runFinishedEvent{Type: runFinished, Timestamp: ms, ThreadID: t.threadID, RunID: runID,
			Outcome: &runOutcome{Type: "success"}})
	}
}

// interrupt ends the stream before the open run ended: RUN_ERROR with code
// (the prompt itself goes on).
func (t *translator) interrupt(code, message string) []any {
	// A stream that runs one prompt always ends with its run's end, even
	// before the run started (RUN_ERROR may be an AG-UI stream's first
	// event).
	if t.run != nil || (t.target != "" && !t.done) {
		t.emit(&runErrorEvent{Type: runError, Timestamp: t.now().UnixMilli(), Message: message, Code: code})
		t.run, t.done = nil, true
	}
	return t.flush()
}

// inRun reports whether a run is open.
func (t *translator) inRun() bool { return t.run != nil }

func (t *translator) emit(ev any) { t.out = append(t.out, ev) }

func (t *translator) flush() []any {
	out := t.out
	t.out = nil
	return out
}

// runPrompt returns the prompt whose run a change belongs to, for the
// changes that make up runs: prompts', blocks', tool calls' and input
// requests'. Others (messages, answers, the conversation) only update the
// thread.
func runPrompt(c view.Change) string {
	switch c.(type) {
	case view.PromptQueued, view.PromptStarted, view.PromptWaiting, view.PromptEnded,
		view.BlockStarted, view.BlockAppended, view.BlockEnded,
		view.CallStarted, view.CallProgressed, view.CallEnded, view.InputRequested:
		return c.Prompt()
	}
	return ""
}

// messageOf returns the assistant message a prompt fills.
func (t *translator) messageOf(c view.Change, promptID string) string {
	switch c := c.(type) {
	case view.PromptQueued:
		return c.MessageID
	case view.BlockStarted:
		return c.MessageID
	}
	return t.conv.MessageOf(promptID)
}

func (t *translator) waitingFor(promptID string) *waitingRun {
	for _, w := range t.waiting {
		if w.promptID == promptID {
			return w
		}
	}
	return nil
}

// startRun opens the run of a prompt: RUN_STARTED, then the conversation
// as it stands.
func (t *translator) startRun(promptID, messageID string, at time.Time) {
	runID := promptID
	if t.target != "" {
		runID = t.targetRun
	}
	t.run = &openRun{id: runID, promptID: promptID, messageID: messageID,
		blocks: map[string]*runBlock{}, calls: map[string]*runBlock{}}
	ms := at.UnixMilli()
	t.emit(&runStartedEvent{Type: runStarted, Timestamp: ms, ThreadID: t.threadID, RunID: runID,
		Metadata: convoMeta(map[string]string{"promptId": promptID, "messageId": messageID})})
	t.emit(&messagesSnapshotEvent{Type: messagesSnapshot, Timestamp: ms, Messages: messagesOf(t.conv, t.queued)})
}

// drain starts the runs of waiting prompts, in order, while no run is
// open, replaying what each one queued.
func (t *translator) drain() {
	for t.run == nil && len(t.waiting) > 0 && !t.done {
		w := t.waiting[0]
		t.waiting = t.waiting[1:]
		at := t.now()
		if len(w.queue) > 0 {
			at = t.timeOf(w.queue[0])
		}
		t.startRun(w.promptID, t.conv.MessageOf(w.promptID), at)
		for _, c := range w.queue {
			if t.run == nil {
				break
			}
			t.translate(c)
		}
	}
}

// push queues c, merging text appended to a block into the previous
// append to the same block (the client sees the text so far in one piece,
// as a late joiner does). Tool call progress has no AG-UI event and is not
// kept.
func (w *waitingRun) push(c view.Change) {
	switch c := c.(type) {
	case view.CallProgressed:
		return
	case view.BlockAppended:
		if n := len(w.queue); n > 0 {
			if prev, ok := w.queue[n-1].(view.BlockAppended); ok && prev.BlockID == c.BlockID {
				prev.Delta += c.Delta
				w.queue[n-1] = prev
				return
			}
		}
	}
	w.queue = append(w.queue, c)
}

// translate turns one change of the open run's prompt into AG-UI events.
func (t *translator) translate(c view.Change) {
	r := t.run
	ms := t.timeOf(c).UnixMilli()
	switch c := c.(type) {
	case view.BlockStarted:
		delete(t.queued, c.BlockID)
		if r.blocks[c.BlockID] != nil {
			return
		}
		rb := &runBlock{id: c.BlockID, typ: c.Type, messageID: c.MessageID, kind: shownAs(c.Kind),
			name: wire.MetadataString(c.Metadata, "name")}
		r.blocks[c.BlockID] = rb
		r.order = append(r.order, rb)
		switch rb.kind {
		case blockText:
			rb.open = true
			t.emit(&messageEvent{Type: textMessageStart, Timestamp: ms, MessageID: rb.id, Role: "assistant",
				Metadata: blockMeta(rb.messageID, rb.typ)})
		case blockReasoning:
			rb.open = true
			t.emit(&messageEvent{Type: reasoningStart, Timestamp: ms, MessageID: rb.id})
			t.emit(&messageEvent{Type: reasoningMessageStart, Timestamp: ms, MessageID: rb.id, Role: "reasoning",
				Metadata: blockMeta(rb.messageID, rb.typ)})
		}
	case view.BlockAppended:
		rb := r.blocks[c.BlockID]
		if rb == nil || c.Delta == "" {
			return
		}
		switch rb.kind {
		case blockText:
			if rb.open {
				t.emit(&contentEvent{Type: textMessageContent, Timestamp: ms, MessageID: rb.id, Delta: c.Delta})
			}
		case blockReasoning:
			if rb.open {
				t.emit(&contentEvent{Type: reasoningMessageContent, Timestamp: ms, MessageID: rb.id, Delta: c.Delta})
			}
		case blockToolUse:
			switch {
			case !rb.started:
				rb.args.WriteString(c.Delta)
			case !rb.ended && !rb.fromInput:
				t.emit(&toolCallArgsEvent{Type: toolCallArgs, Timestamp: ms, ToolCallID: rb.callID, Delta: c.Delta})
			}
		case blockOther:
			rb.content.WriteString(c.Delta)
		}
	case view.BlockEnded:
		rb := r.blocks[c.BlockID]
		if rb == nil {
			return
		}
		switch rb.kind {
		case blockText, blockReasoning:
			t.closeMessage(rb, ms)
		case blockToolUse:
			if !rb.started {
				// A tool_use block that never got its tool call: the call
				// is the block (as in the snapshot).
				if name := wire.MetadataString(c.Metadata, "name"); name != "" {
					rb.name = name
				}
				t.startToolCall(rb, rb.id, rb.name, rb.args.String(), ms)
			}
			t.endToolCall(rb, ms)
		case blockOther:
			value := map[string]any{"messageId": rb.messageID, "blockId": rb.id, "blockType": rb.typ,
				"content": rb.content.String()}
			if c.Metadata != nil {
				value["metadata"] = c.Metadata.AsMap()
			}
			t.emit(&customEvent{Type: custom, Timestamp: ms, Name: "convo.block", Value: value})
		}
	case view.CallStarted:
		tc := c.Call
		rb := r.blocks[c.BlockID]
		if rb == nil || rb.kind != blockToolUse {
			return
		}
		r.calls[tc.GetId()] = rb
		if rb.started {
			return
		}
		args := rb.args.String()
		if args == "" {
			args, rb.fromInput = toolArguments("", c.Input), true
		}
		t.startToolCall(rb, tc.GetId(), tc.GetName(), args, ms)
	case view.CallEnded:
		t.toolResult(c.Call, ms)
	case view.InputRequested:
		r.asks = append(r.asks, c.Request)
	case view.PromptWaiting:
		t.pause(ms)
	case view.PromptEnded:
		switch c.Outcome {
		case view.Completed:
			t.finish(ms, "success")
		case view.Cancelled:
			t.finish(ms, "cancelled")
		case view.Failed:
			t.closeAll(ms)
			msg := c.Error
			if msg == "" {
				msg = "the reply failed"
			}
			t.emit(&runErrorEvent{Type: runError, Timestamp: ms, Message: msg, Code: codePromptFailed})
			t.endRun()
		}
	}
}

func (t *translator) closeMessage(rb *runBlock, ms int64) {
	if !rb.open {
		return
	}
	rb.open = false
	if rb.kind == blockText {
		t.emit(&messageEvent{Type: textMessageEnd, Timestamp: ms, MessageID: rb.id})
		return
	}
	t.emit(&messageEvent{Type: reasoningMessageEnd, Timestamp: ms, MessageID: rb.id})
	t.emit(&messageEvent{Type: reasoningEnd, Timestamp: ms, MessageID: rb.id})
}

func (t *translator) startToolCall(rb *runBlock, callID, name, args string, ms int64) {
	rb.started, rb.callID = true, callID
	t.emit(&toolCallStartEvent{Type: toolCallStart, Timestamp: ms, ToolCallID: callID,
		ToolCallName: wire.ToolName(name), ParentMessageID: rb.messageID})
	if args != "" {
		t.emit(&toolCallArgsEvent{Type: toolCallArgs, Timestamp: ms, ToolCallID: callID, Delta: args})
	}
}

func (t *translator) endToolCall(rb *runBlock, ms int64) {
	if rb.started && !rb.ended {
		t.emit(&toolCallEndEvent{Type: toolCallEnd, Timestamp: ms, ToolCallID: rb.callID})
	}
	rb.ended = true
}

// toolResult sends an ended tool call's TOOL_CALL_RESULT, closing the call
// first when its block is still open. The result's message id is the
// tool call's id.
func (t *translator) toolResult(tc *convov1.ToolCall, ms int64) {
	callID := tc.GetId()
	if rb := t.run.calls[callID]; rb != nil {
		t.endToolCall(rb, ms)
		callID = rb.callID
	}
	content, _ := toolResult(tc.GetOutput(), tc)
	t.emit(&toolCallResultEvent{Type: toolCallResult, Timestamp: ms, MessageID: tc.GetId(),
		ToolCallID: callID, Content: content, Role: "tool"})
}

// closeAll ends whatever the run still has open (convo ends a prompt's
// blocks before the prompt, so normally nothing).
func (t *translator) closeAll(ms int64) {
	for _, rb := range t.run.order {
		switch rb.kind {
		case blockText, blockReasoning:
			t.closeMessage(rb, ms)
		case blockToolUse:
			t.endToolCall(rb, ms)
		}
	}
}

func (t *translator) finish(ms int64, outcome string) {
	t.closeAll(ms)
	t.emit(&runFinishedEvent{Type: runFinished, Timestamp: ms, ThreadID: t.threadID, RunID: t.run.id,
		Outcome: &runOutcome{Type: outcome}})
	t.endRun()
}

// pause ends a run whose prompt waits for input (docs/protocols.md): its
// approvals and questions are interrupts (outcome interrupt), its client
// tools frontend tool calls left unanswered (outcome success, naming
// them in pendingToolCallIds).
func (t *translator) pause(ms int64) {
	t.closeAll(ms)
	outcome := &runOutcome{Type: "success"}
	for _, in := range t.run.asks {
		callID := in.GetToolCallId()
		if rb := t.run.calls[callID]; rb != nil {
			callID = rb.callID
		}
		switch in.GetKind() {
		case "client_tool":
			outcome.PendingToolCallIDs = append(outcome.PendingToolCallIDs, callID)
		default:
			it := interrupt{ID: in.GetToolCallId(), Reason: in.GetKind(), ToolCallID: callID,
				Metadata: map[string]any{"convo": map[string]any{"request": in.GetRequest().AsMap()}}}
			it.Message = in.GetRequest().GetFields()["message"].GetStringValue()
			if q := in.GetRequest().GetFields()["question"].GetStringValue(); q != "" {
				it.Message = q
			}
			outcome.Interrupts = append(outcome.Interrupts, it)
		}
	}
	if len(outcome.Interrupts) > 0 {
		outcome.Type, outcome.PendingToolCallIDs = "interrupt", nil
	}
	t.emit(&runFinishedEvent{Type: runFinished, Timestamp: ms, ThreadID: t.threadID, RunID: t.run.id, Outcome: outcome})
	promptID := t.run.promptID
	t.endRun()
	// The prompt goes on once answered: a follower sees that as its next
	// run (a stream that runs one prompt is done).
	delete(t.finished, promptID)
}

func (t *translator) endRun() {
	t.finished[t.run.promptID] = true
	t.run = nil
	if t.target != "" {
		t.done = true
	}
}

// timeOf is when a change was committed (now for one without a time).
func (t *translator) timeOf(c view.Change) time.Time {
	if at := c.Time(); !at.IsZero() {
		return at
	}
	return t.now()
}

package agui

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
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
	th       *thread
	// target, when set, is the one prompt the stream runs (POST /v1/agui),
	// under the run id targetRun: other prompts' events only update the
	// thread, and the stream is done when the target's run ends. Empty:
	// every prompt is a run, in turn.
	target, targetRun string
	done              bool

	run      *openRun
	waiting  []*waitingRun
	finished map[string]bool // prompts whose run ended
	// blockPrompt names the prompt of every block seen, so that tool call
	// events (which name only the block) find their run.
	blockPrompt map[string]string

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
// events so far.
type waitingRun struct {
	promptID string
	queue    []*convov1.Event
	// lastOwned: queue's last event is this run's copy (coalesced deltas),
	// not the hub's shared one.
	lastOwned bool
}

// newTranslator starts from a stream's snapshot. target, when set, is the
// only prompt to run, as run runID.
func newTranslator(threadID string, snap *convov1.Snapshot, target, runID string) *translator {
	t := &translator{
		threadID: threadID, th: newThread(snap), target: target, targetRun: runID,
		finished: map[string]bool{}, blockPrompt: map[string]string{}, now: time.Now,
	}
	for _, m := range snap.GetMessages() {
		for _, b := range m.Blocks {
			t.blockPrompt[b.Id] = m.PromptId
		}
	}
	return t
}

// begin returns the stream's first events: following every prompt, the
// run of the first prompt already active (the others wait for theirs).
func (t *translator) begin() []any {
	if t.target == "" {
		for _, p := range t.th.active() {
			if t.run == nil {
				t.startRun(p.promptID, p.messageID, t.now())
			} else {
				t.waiting = append(t.waiting, &waitingRun{promptID: p.promptID})
			}
		}
	}
	return t.flush()
}

// apply takes the stream's next event (replayed or live) and returns the
// AG-UI events it makes.
func (t *translator) apply(ev *convov1.Event) []any {
	if s := ev.GetBranchSwitched(); s != nil {
		t.th.apply(ev)
		t.branchSwitched(ev, s)
		return t.flush()
	}
	promptID := t.promptOf(ev)
	plain := plainEvent(ev) // the thread sees a pause's message update
	switch {
	case promptID == "" || t.finished[promptID] || t.done:
		t.th.apply(plain)
	case t.run != nil && t.run.promptID == promptID:
		t.th.apply(plain)
		t.translate(ev)
	case t.target != "":
		if promptID == t.target && t.run == nil {
			t.startRun(promptID, t.messageOf(ev, promptID), eventTime(ev, t.now))
			t.th.apply(plain)
			t.translate(ev)
		} else {
			t.th.apply(plain)
		}
	default:
		w := t.waitingFor(promptID)
		if w == nil && t.run == nil {
			// The snapshot is taken before the event is applied: what the
			// event adds reaches the client as this run's events.
			t.startRun(promptID, t.messageOf(ev, promptID), eventTime(ev, t.now))
			t.th.apply(plain)
			t.translate(ev)
			break
		}
		if w == nil {
			w = &waitingRun{promptID: promptID}
			t.waiting = append(t.waiting, w)
		}
		w.push(ev)
		if b := t.th.apply(plain); b != nil {
			b.queued = true
		}
	}
	t.drain()
	return t.flush()
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
func (t *translator) branchSwitched(ev *convov1.Event, s *convov1.BranchSwitched) {
	var leaf *convov1.Message
	for _, m := range s.GetMessages() {
		for _, b := range m.GetBlocks() {
			t.blockPrompt[b.GetId()] = m.GetPromptId()
		}
		if m.GetId() == s.GetLeafMessageId() {
			leaf = m
		}
	}
	ms := eventTime(ev, t.now).UnixMilli()
	switch {
	case t.target != "" || t.done:
	case t.run != nil:
		// Not written while a prompt is unfinished; should one come, the
		// open run shows it.
		t.emit(&messagesSnapshotEvent{Type: messagesSnapshot, Timestamp: ms, Messages: t.th.snapshot()})
	case leaf != nil && leaf.GetPromptId() != "" && leaf.GetStatus() == "pending":
		// An edit's or a regeneration's: its prompt's run is next.
	default:
		runID := fmt.Sprintf("branch-%d", ev.GetSeq())
		meta := map[string]string{"leafMessageId": s.GetLeafMessageId()}
		if s.GetForkMessageId() != "" {
			meta["forkMessageId"] = s.GetForkMessageId()
		}
		t.emit(&runStartedEvent{Type: runStarted, Timestamp: ms, ThreadID: t.threadID, RunID: runID, Metadata: convoMeta(meta)})
		t.emit(&messagesSnapshotEvent{Type: messagesSnapshot, Timestamp: ms, Messages: t.th.snapshot()})
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

// promptOf returns the prompt an event belongs to, for the events that
// make up runs: prompts', blocks' and tool calls'. Others (messages, the
// conversation) only update the thread.
func (t *translator) promptOf(ev *convov1.Event) string {
	switch k := ev.Kind.(type) {
	case *convov1.Event_PromptQueued:
		return k.PromptQueued.GetPrompt().GetId()
	case *convov1.Event_PromptStarted:
		return k.PromptStarted.GetPrompt().GetId()
	case *convov1.Event_PromptCompleted:
		return k.PromptCompleted.GetPrompt().GetId()
	case *convov1.Event_PromptFailed:
		return k.PromptFailed.GetPrompt().GetId()
	case *convov1.Event_PromptCancelled:
		return k.PromptCancelled.GetPrompt().GetId()
	case *convov1.Event_BlockStart:
		t.blockPrompt[k.BlockStart.BlockId] = k.BlockStart.PromptId
		return k.BlockStart.PromptId
	case *convov1.Event_BlockDelta:
		return k.BlockDelta.PromptId
	case *convov1.Event_BlockEnd:
		return k.BlockEnd.PromptId
	case *convov1.Event_ToolCallStarted:
		return t.blockPrompt[k.ToolCallStarted.GetToolCall().GetBlockId()]
	case *convov1.Event_ToolCallProgress:
		return t.blockPrompt[k.ToolCallProgress.BlockId]
	case *convov1.Event_ToolCallCompleted:
		return t.blockPrompt[k.ToolCallCompleted.GetToolCall().GetBlockId()]
	case *convov1.Event_ToolCallFailed:
		return t.blockPrompt[k.ToolCallFailed.GetToolCall().GetBlockId()]
	case *convov1.Event_InputRequested:
		return k.InputRequested.GetInputRequest().GetPromptId()
	case *convov1.Event_PromptWaiting:
		return k.PromptWaiting.GetPrompt().GetId()
	}
	return ""
}

// plainEvent is ev for the thread: a pause's event is the messageUpdated
// a client that did not ask for pauses gets (the thread has no requests).
func plainEvent(ev *convov1.Event) *convov1.Event {
	return wire.WithoutPauseEvents(&wire.Response{Kind: &convov1.StreamConversationResponse_Event{Event: ev}}).GetEvent()
}

// messageOf returns the assistant message a prompt fills.
func (t *translator) messageOf(ev *convov1.Event, promptID string) string {
	switch k := ev.Kind.(type) {
	case *convov1.Event_PromptQueued:
		return k.PromptQueued.GetPrompt().GetMessageId()
	case *convov1.Event_BlockStart:
		return k.BlockStart.MessageId
	}
	return t.th.messageOf(promptID)
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
	t.emit(&messagesSnapshotEvent{Type: messagesSnapshot, Timestamp: ms, Messages: t.th.snapshot()})
}

// drain starts the runs of waiting prompts, in order, while no run is
// open, replaying what each one queued.
func (t *translator) drain() {
	for t.run == nil && len(t.waiting) > 0 && !t.done {
		w := t.waiting[0]
		t.waiting = t.waiting[1:]
		at := t.now()
		if len(w.queue) > 0 {
			at = eventTime(w.queue[0], t.now)
		}
		t.startRun(w.promptID, t.th.messageOf(w.promptID), at)
		for _, ev := range w.queue {
			if t.run == nil {
				break
			}
			t.translate(ev)
		}
	}
}

// push queues ev, merging a block delta into the previous one of the same
// block (the client sees the text so far in one piece, as a late joiner
// does). Tool call progress has no AG-UI event and is not kept.
func (w *waitingRun) push(ev *convov1.Event) {
	if ev.GetToolCallProgress() != nil {
		return
	}
	if d := ev.GetBlockDelta(); d != nil && len(w.queue) > 0 {
		last := w.queue[len(w.queue)-1]
		if prev := last.GetBlockDelta(); prev != nil && prev.BlockId == d.BlockId {
			if !w.lastOwned {
				last = proto.Clone(last).(*convov1.Event)
				w.queue[len(w.queue)-1] = last
				w.lastOwned = true
			}
			last.GetBlockDelta().Content += d.Content
			return
		}
	}
	w.queue = append(w.queue, ev)
	w.lastOwned = false
}

// translate turns one event of the open run's prompt into AG-UI events.
func (t *translator) translate(ev *convov1.Event) {
	r := t.run
	ms := eventTime(ev, t.now).UnixMilli()
	switch k := ev.Kind.(type) {
	case *convov1.Event_BlockStart:
		s := k.BlockStart
		if b := t.th.blocks[s.BlockId]; b != nil {
			b.queued = false
		}
		if r.blocks[s.BlockId] != nil {
			return
		}
		rb := &runBlock{id: s.BlockId, typ: s.BlockType, messageID: s.MessageId, kind: kindOf(s.BlockType),
			name: wire.MetadataString(s.Metadata, "name")}
		r.blocks[s.BlockId] = rb
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
	case *convov1.Event_BlockDelta:
		d := k.BlockDelta
		rb := r.blocks[d.BlockId]
		if rb == nil || d.Content == "" {
			return
		}
		switch rb.kind {
		case blockText:
			if rb.open {
				t.emit(&contentEvent{Type: textMessageContent, Timestamp: ms, MessageID: rb.id, Delta: d.Content})
			}
		case blockReasoning:
			if rb.open {
				t.emit(&contentEvent{Type: reasoningMessageContent, Timestamp: ms, MessageID: rb.id, Delta: d.Content})
			}
		case blockToolUse:
			switch {
			case !rb.started:
				rb.args.WriteString(d.Content)
			case !rb.ended && !rb.fromInput:
				t.emit(&toolCallArgsEvent{Type: toolCallArgs, Timestamp: ms, ToolCallID: rb.callID, Delta: d.Content})
			}
		case blockOther:
			rb.content.WriteString(d.Content)
		}
	case *convov1.Event_BlockEnd:
		e := k.BlockEnd
		rb := r.blocks[e.BlockId]
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
				if name := wire.MetadataString(e.Metadata, "name"); name != "" {
					rb.name = name
				}
				t.startToolCall(rb, rb.id, rb.name, rb.args.String(), ms)
			}
			t.endToolCall(rb, ms)
		case blockOther:
			value := map[string]any{"messageId": rb.messageID, "blockId": rb.id, "blockType": rb.typ,
				"content": rb.content.String()}
			if e.Metadata != nil {
				value["metadata"] = e.Metadata.AsMap()
			}
			t.emit(&customEvent{Type: custom, Timestamp: ms, Name: "convo.block", Value: value})
		}
	case *convov1.Event_ToolCallStarted:
		tc := k.ToolCallStarted.GetToolCall()
		rb := r.blocks[tc.GetBlockId()]
		if rb == nil || rb.kind != blockToolUse {
			return
		}
		r.calls[tc.Id] = rb
		if rb.started {
			return
		}
		args := rb.args.String()
		if args == "" {
			input := k.ToolCallStarted.Input
			if input == nil {
				input = tc.Input
			}
			args, rb.fromInput = toolArguments("", input), true
		}
		t.startToolCall(rb, tc.Id, tc.Name, args, ms)
	case *convov1.Event_ToolCallCompleted:
		t.toolResult(k.ToolCallCompleted.GetToolCall(), ms)
	case *convov1.Event_ToolCallFailed:
		t.toolResult(k.ToolCallFailed.GetToolCall(), ms)
	case *convov1.Event_InputRequested:
		r.asks = append(r.asks, k.InputRequested.GetInputRequest())
	case *convov1.Event_PromptWaiting:
		t.pause(ms)
	case *convov1.Event_PromptCompleted:
		t.finish(ms, "success")
	case *convov1.Event_PromptCancelled:
		t.finish(ms, "cancelled")
	case *convov1.Event_PromptFailed:
		t.closeAll(ms)
		msg := k.PromptFailed.Error
		if msg == "" {
			msg = "the reply failed"
		}
		t.emit(&runErrorEvent{Type: runError, Timestamp: ms, Message: msg, Code: codePromptFailed})
		t.endRun()
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

// eventTime is when the event was committed (now for an event without a
// time).
func eventTime(ev *convov1.Event, now func() time.Time) time.Time {
	if ev.GetCreatedAt() == nil {
		return now()
	}
	return ev.GetCreatedAt().AsTime()
}

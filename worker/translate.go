package worker

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/jsonlimit"
)

// item is one output item of a round: an index of the model's stream, and
// the block it becomes.
type item struct {
	index    int
	kind     itemKind
	blockID  uuid.UUID // uuid.Nil until the first non-empty chunk
	metadata map[string]any
	// text is everything streamed to the item: the answer's text for the
	// next round's context, a structured answer or tool arguments to parse
	// at flush.
	text    strings.Builder
	flushed bool
	// Tool calls only.
	callID, callName string
}

// pendingCall is a tool call the model made in a round, recorded on its
// tool_use block and waiting for the runtime to run it.
type pendingCall struct {
	blockID uuid.UUID
	// toolCallID is the convo tool call; uuid.Nil when none was recorded.
	toolCallID uuid.UUID
	// id is the model's id of the call, name the tool.
	id, name  string
	arguments string
	input     json.RawMessage
	// badArgs, when set, is why the call cannot run: it was failed at flush.
	badArgs string
	// paused, when set, is a call that waits for a person: nothing of it
	// is written at flush (see writer.wait).
	paused *pausedCall
	// inputKind is the kind of input request a resumed call waited for.
	inputKind string
}

// translator turns one round of a model's Events into blocks and tool
// calls: message → text block; reasoning → reasoning block; structured →
// structured block (JSON checked at flush); tool call → tool_use block
// whose deltas are the argument chunks, parsed at flush into the tool
// call's input.
type translator struct {
	w *writer
	// pause says whether a call waits for a person (see
	// registeredTool.pause); nil: none does.
	pause  func(name string, input json.RawMessage) (kind string, request json.RawMessage, expiresAt *time.Time)
	items  map[int]*item
	order  []*item
	calls  []*pendingCall
	finish *Finish
	// firstOutput is when the model's first Part came (zero: none yet),
	// for the time-to-first-token metric.
	firstOutput time.Time
}

func newTranslator(w *writer) *translator {
	return &translator{w: w, items: map[int]*item{}}
}

// errModel is a model that broke the streaming protocol: the prompt fails
// with its message.
type errModel struct{ msg string }

func (e *errModel) Error() string { return e.msg }

func modelErrorf(format string, args ...any) error {
	return &errModel{msg: fmt.Sprintf(format, args...)}
}

// handle translates one event.
func (t *translator) handle(ev Event) error {
	if t.finish != nil {
		return modelErrorf("model streamed %T after it finished", ev)
	}
	switch ev := ev.(type) {
	case Part:
		return t.part(ev)
	case Flush:
		it := t.items[ev.Index]
		if it == nil {
			return nil // an index that never streamed anything: nothing to close
		}
		if it.flushed {
			return modelErrorf("model flushed output item %d twice", ev.Index)
		}
		return t.flush(it, ev.Metadata)
	case Finish:
		for _, it := range t.order {
			if !it.flushed {
				if err := t.flush(it, nil); err != nil {
					return err
				}
			}
		}
		t.finish = &ev
		return nil
	case nil:
		return modelErrorf("model streamed a nil event")
	}
	return modelErrorf("model streamed an unknown event %T", ev)
}

func (t *translator) part(p Part) error {
	kind := chunkKind(p.Chunk)
	if kind == 0 {
		return modelErrorf("model streamed an unknown chunk %T at output item %d", p.Chunk, p.Index)
	}
	it := t.items[p.Index]
	if it == nil {
		it = &item{index: p.Index, kind: kind, metadata: map[string]any{}}
		t.items[p.Index] = it
		t.order = append(t.order, it)
	}
	if it.flushed {
		return modelErrorf("model streamed to output item %d after flushing it", p.Index)
	}
	if it.kind != kind {
		return modelErrorf("model streamed a %s chunk to output item %d, which holds a %s", kind, p.Index, it.kind)
	}
	maps.Copy(it.metadata, p.Metadata)

	var text string
	switch c := p.Chunk.(type) {
	case MessageChunk:
		text = string(c)
	case ReasoningChunk:
		text = string(c)
	case StructuredChunk:
		text = string(c)
	case ToolCallStart:
		// First non-empty value wins, field by field.
		if it.callID == "" {
			it.callID = c.ID
		}
		if it.callName == "" {
			it.callName = c.Name
		}
		if it.blockID == uuid.Nil && it.callName != "" {
			return t.open(it)
		}
		return nil
	case ToolCallArgs:
		text = string(c)
	}
	if text == "" {
		return nil
	}
	it.text.WriteString(text)
	if it.blockID == uuid.Nil {
		if err := t.open(it); err != nil {
			return err
		}
	}
	return t.w.appendText(target{id: it.blockID}, text)
}

// open starts the item's block.
func (t *translator) open(it *item) error {
	var meta map[string]any
	if it.kind == kindToolCall && it.callName != "" {
		meta = map[string]any{"name": it.callName}
	}
	id, err := t.w.startBlock(it.kind.blockType(), meta)
	if err != nil {
		return err
	}
	it.blockID = id
	return nil
}

// flush closes an item: its block ends with the merged metadata. A
// structured answer must be valid JSON; a tool call's arguments are parsed
// and the call recorded.
func (t *translator) flush(it *item, metadata map[string]any) error {
	it.flushed = true
	maps.Copy(it.metadata, metadata)
	switch it.kind {
	case kindToolCall:
		return t.flushToolCall(it)
	case kindStructured:
		if it.blockID == uuid.Nil {
			return nil
		}
		// One pass: jsonlimit.Check tells text that is not JSON from JSON
		// its rule refuses.
		if err := jsonlimit.Check([]byte(it.text.String())); jsonlimit.IsSyntax(err) {
			return modelErrorf("the model's structured output is not valid JSON: %v", err)
		} else if err != nil {
			return modelErrorf("the model's structured output is JSON convo does not accept: %v", err)
		}
	}
	if it.blockID == uuid.Nil {
		return nil // nothing was streamed: no empty block
	}
	return t.w.endBlock(it.blockID, it.metadata)
}

func (t *translator) flushToolCall(it *item) error {
	if it.callName == "" {
		return modelErrorf("the model streamed tool call %d without a tool name", it.index)
	}
	if it.blockID == uuid.Nil {
		if err := t.open(it); err != nil {
			return err
		}
	}
	call := &pendingCall{blockID: it.blockID, id: it.callID, name: it.callName, arguments: it.text.String()}
	if call.id == "" {
		call.id = fmt.Sprintf("call_%d_%d", len(t.calls), it.index)
	}
	args := strings.TrimSpace(call.arguments)
	if args == "" {
		args = "{}" // no arguments at all: an empty object
	}
	var input json.RawMessage
	if err := jsonlimit.Check([]byte(args)); jsonlimit.IsSyntax(err) {
		call.badArgs = fmt.Sprintf("invalid argument JSON for tool %s: %v", call.name, err)
		// Keep what the model sent, as a JSON string, so the call shows it.
		input, _ = json.Marshal(call.arguments)
	} else if err != nil {
		// JSON that convo's rule refuses ({"expression": 1e400}): the
		// call fails as for arguments its schema refuses, the model is
		// told why, and the arguments are kept as a JSON string, never
		// as such (stored, they would make the conversation unreadable).
		call.badArgs = fmt.Sprintf("invalid arguments for tool %s: %v", call.name, err)
		input, _ = json.Marshal(call.arguments)
	} else {
		input = json.RawMessage(args)
	}
	call.input = input
	meta := maps.Clone(it.metadata)
	meta["name"] = call.name
	meta["callId"] = call.id
	if call.badArgs == "" && t.pause != nil {
		if kind, request, expiresAt := t.pause(call.name, input); kind != "" {
			// Recorded with its request in the batch that parks the
			// prompt, so no one sees it started and not waiting.
			blockMeta, err := marshalObject(meta)
			if err != nil {
				return err
			}
			call.toolCallID = uuid.New()
			call.paused = &pausedCall{blockID: it.blockID, toolCallID: call.toolCallID, name: call.name,
				input: input, blockMeta: blockMeta, kind: kind, request: request, expiresAt: expiresAt}
			t.calls = append(t.calls, call)
			return nil
		}
	}
	// Argument deltas first, then the call, then the end of the block.
	if err := t.w.flushAll(); err != nil {
		return err
	}
	id, err := t.w.startToolCall(it.blockID, call.name, input)
	if err != nil {
		return err
	}
	call.toolCallID = id
	if call.badArgs != "" {
		if err := t.w.endToolCall(id, "", call.badArgs); err != nil {
			return err
		}
	}
	t.calls = append(t.calls, call)
	return t.w.endBlock(it.blockID, meta)
}

// answerText is the text the model answered in the round (message items
// in order), for the next round's context.
func (t *translator) answerText() string {
	var b strings.Builder
	for _, it := range t.order {
		if it.kind == kindMessage || it.kind == kindStructured {
			b.WriteString(it.text.String())
		}
	}
	return b.String()
}

// marshalObject encodes metadata as a JSON object; nil stays nil (SQL
// NULL, which the worker API reads as "nothing to merge"). Metadata
// follows convo's rule for accepted JSON: a value the rule refuses (a
// json.Number 1e400 a model handed over, nesting past 64 levels) is
// written as jsonlimit's placeholder, so that the block keeps the rest of
// its metadata and the conversation stays readable; NUL becomes U+FFFD,
// as in every write (withoutNUL). Metadata that still breaks the rule (a
// lone surrogate in a json.RawMessage) is an error.
func marshalObject(m map[string]any) (json.RawMessage, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	b = withoutNUL(b)
	if jsonlimit.Check(b) != nil {
		b = jsonlimit.Sanitize(b)
		if err := jsonlimit.Check(b); err != nil {
			return nil, fmt.Errorf("encode metadata: %w", err)
		}
	}
	return b, nil
}

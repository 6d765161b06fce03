package agui

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/eventscript"
)

// feed runs events through tr and returns the AG-UI events as JSON
// objects.
func feed(t *testing.T, tr *translator, events ...*convov1.Event) []map[string]any {
	t.Helper()
	var out []any
	for _, ev := range events {
		out = append(out, tr.apply(ev)...)
	}
	return asJSON(t, out)
}

func asJSON(t *testing.T, events []any) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(events))
	for i, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func types(events []map[string]any) string {
	var names []string
	for _, ev := range events {
		names = append(names, ev["type"].(string))
	}
	return strings.Join(names, " ")
}

// expect checks that got is exactly want, field by field (JSON values).
func expect(t *testing.T, got []map[string]any, want ...map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events: %s\nwant %d events: %v", types(got), len(want), want)
	}
	for i := range want {
		w := asJSON(t, []any{want[i]})[0]
		if !reflect.DeepEqual(got[i], w) {
			g, _ := json.Marshal(got[i])
			wj, _ := json.Marshal(w)
			t.Errorf("event %d:\n got %s\nwant %s", i, g, wj)
		}
	}
}

type obj = map[string]any

func meta(messageID, blockType string) obj {
	return obj{"convo": obj{"messageId": messageID, "blockType": blockType}}
}

func emptySnapshot() *convov1.Snapshot { return &convov1.Snapshot{} }

func TestTranslatorMapsEveryBlockKind(t *testing.T) {
	t.Parallel()
	s := eventscript.New()
	tr := newTranslator("conv", emptySnapshot(), "", "")
	if out := tr.begin(); len(out) != 0 {
		t.Fatalf("an idle conversation's stream starts with %v; want nothing until a prompt", out)
	}

	// The prompt is queued: its run starts, with the conversation so far.
	got := feed(t, tr, s.User("U", "What is 6*7?"), s.Assistant("M", "P"), s.Queued("P", "M"), s.Started("P", "M"))
	expect(t, got,
		obj{"type": "RUN_STARTED", "timestamp": s.At(3), "threadId": "conv", "runId": "P",
			"metadata": obj{"convo": obj{"promptId": "P", "messageId": "M"}}},
		obj{"type": "MESSAGES_SNAPSHOT", "timestamp": s.At(3), "messages": []obj{{"id": "U", "role": "user", "content": "What is 6*7?"}}},
	)

	// Reasoning: a span and a message, both with the block's id.
	got = feed(t, tr, s.Start("P", "M", "R", "reasoning", 0, nil), s.Delta("P", "M", "R", "Use the "),
		s.Delta("P", "M", "R", "calculator."), s.End("P", "M", "R", obj{"signature": "x"}))
	expect(t, got,
		obj{"type": "REASONING_START", "timestamp": s.At(5), "messageId": "R"},
		obj{"type": "REASONING_MESSAGE_START", "timestamp": s.At(5), "messageId": "R", "role": "reasoning", "metadata": meta("M", "reasoning")},
		obj{"type": "REASONING_MESSAGE_CONTENT", "timestamp": s.At(6), "messageId": "R", "delta": "Use the "},
		obj{"type": "REASONING_MESSAGE_CONTENT", "timestamp": s.At(7), "messageId": "R", "delta": "calculator."},
		obj{"type": "REASONING_MESSAGE_END", "timestamp": s.At(8), "messageId": "R"},
		obj{"type": "REASONING_END", "timestamp": s.At(8), "messageId": "R"},
	)

	// A tool call: the arguments streamed before the call is recorded
	// wait for it (TOOL_CALL_START needs the call's id and name); later
	// ones stream; the block's end ends the call; its result follows.
	got = feed(t, tr, s.Start("P", "M", "T", "tool_use", 1, obj{"name": "calculator"}),
		s.Delta("P", "M", "T", `{"expression":`), s.Delta("P", "M", "T", ` "6*7"`),
		s.ToolStarted("C", "T", "calculator", obj{"expression": "6*7"}),
		s.Delta("P", "M", "T", `}`),
		s.Progress("C", "T", "evaluating… "), s.End("P", "M", "T", nil),
		s.ToolDone("C", "T", "calculator", "evaluating… 42", ""))
	expect(t, got,
		obj{"type": "TOOL_CALL_START", "timestamp": s.At(12), "toolCallId": "C", "toolCallName": "calculator", "parentMessageId": "M"},
		obj{"type": "TOOL_CALL_ARGS", "timestamp": s.At(12), "toolCallId": "C", "delta": `{"expression": "6*7"`},
		obj{"type": "TOOL_CALL_ARGS", "timestamp": s.At(13), "toolCallId": "C", "delta": `}`},
		obj{"type": "TOOL_CALL_END", "timestamp": s.At(15), "toolCallId": "C"},
		obj{"type": "TOOL_CALL_RESULT", "timestamp": s.At(16), "messageId": "C", "toolCallId": "C", "content": "evaluating… 42", "role": "tool"},
	)

	// tool_result blocks: nothing (TOOL_CALL_RESULT carried the output).
	// Text and structured blocks: text messages with the block's id.
	// Another block type: one CUSTOM event at its end.
	got = feed(t, tr,
		s.Start("P", "M", "X", "tool_result", 2, obj{"toolCallId": "C"}), s.Delta("P", "M", "X", "42"), s.End("P", "M", "X", nil),
		s.Start("P", "M", "Y", "text", 3, nil), s.Delta("P", "M", "Y", "6*7 is "), s.Delta("P", "M", "Y", "**42**."), s.End("P", "M", "Y", nil),
		s.Start("P", "M", "S", "structured", 4, nil), s.Delta("P", "M", "S", `{"answer":42}`), s.End("P", "M", "S", nil),
		s.Start("P", "M", "K", "citation", 5, nil), s.Delta("P", "M", "K", "Knuth, "), s.Delta("P", "M", "K", "1968"),
		s.End("P", "M", "K", obj{"url": "https://example.org"}))
	expect(t, got,
		obj{"type": "TEXT_MESSAGE_START", "timestamp": s.At(20), "messageId": "Y", "role": "assistant", "metadata": meta("M", "text")},
		obj{"type": "TEXT_MESSAGE_CONTENT", "timestamp": s.At(21), "messageId": "Y", "delta": "6*7 is "},
		obj{"type": "TEXT_MESSAGE_CONTENT", "timestamp": s.At(22), "messageId": "Y", "delta": "**42**."},
		obj{"type": "TEXT_MESSAGE_END", "timestamp": s.At(23), "messageId": "Y"},
		obj{"type": "TEXT_MESSAGE_START", "timestamp": s.At(24), "messageId": "S", "role": "assistant", "metadata": meta("M", "structured")},
		obj{"type": "TEXT_MESSAGE_CONTENT", "timestamp": s.At(25), "messageId": "S", "delta": `{"answer":42}`},
		obj{"type": "TEXT_MESSAGE_END", "timestamp": s.At(26), "messageId": "S"},
		obj{"type": "CUSTOM", "timestamp": s.At(30), "name": "convo.block", "value": obj{"messageId": "M", "blockId": "K",
			"blockType": "citation", "content": "Knuth, 1968", "metadata": obj{"url": "https://example.org"}}},
	)

	// The prompt completes: the run finishes, and nothing else of the
	// prompt makes an event.
	got = feed(t, tr, s.Completed("P", "M"), s.Event(&convov1.MessageUpdated{Message: &convov1.Message{Id: "M", Role: "assistant", Status: "completed", PromptId: "P"}}))
	expect(t, got, obj{"type": "RUN_FINISHED", "timestamp": s.At(31), "threadId": "conv", "runId": "P", "outcome": obj{"type": "success"}})

	// The next run's snapshot holds the reply as a client's reducer built
	// it from those events: reasoning, the tool call in an assistant
	// message with the convo message's id, its result right after, then
	// the text messages. The citation has no message.
	snap, _ := json.Marshal(messagesOf(tr.conv, tr.queued))
	want, _ := json.Marshal([]obj{
		{"id": "U", "role": "user", "content": "What is 6*7?"},
		{"id": "R", "role": "reasoning", "content": "Use the calculator.", "metadata": meta("M", "reasoning")},
		{"id": "M", "role": "assistant", "toolCalls": []obj{{"id": "C", "type": "function",
			"function": obj{"name": "calculator", "arguments": `{"expression": "6*7"}`}}}},
		{"id": "C", "role": "tool", "content": "evaluating… 42", "toolCallId": "C"},
		{"id": "Y", "role": "assistant", "content": "6*7 is **42**.", "metadata": meta("M", "text")},
		{"id": "S", "role": "assistant", "content": `{"answer":42}`, "metadata": meta("M", "structured")},
	})
	if !jsonEqual(snap, want) {
		t.Errorf("snapshot:\n%s\nwant\n%s", snap, want)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(b, &y)
	return reflect.DeepEqual(x, y)
}

func TestTranslatorToolCalls(t *testing.T) {
	t.Parallel()
	// Each case is one run's tool call events after RUN_STARTED and the
	// snapshot.
	run := func(t *testing.T, build func(s *eventscript.Script) []*convov1.Event) []map[string]any {
		s := eventscript.New()
		tr := newTranslator("conv", emptySnapshot(), "", "")
		feed(t, tr, s.Assistant("M", "P"), s.Queued("P", "M"))
		return feed(t, tr, build(s)...)
	}

	t.Run("ArgumentsFromTheInputWhenNoneStreamed", func(t *testing.T) {
		t.Parallel()
		got := run(t, func(s *eventscript.Script) []*convov1.Event {
			return []*convov1.Event{s.Start("P", "M", "T", "tool_use", 0, nil),
				s.ToolStarted("C", "T", "search", obj{"q": "go"}), s.Delta("P", "M", "T", "ignored"), s.End("P", "M", "T", nil)}
		})
		if types(got) != "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END" || got[1]["delta"] != `{"q":"go"}` || got[0]["toolCallName"] != "search" {
			t.Fatalf("%s: %v", types(got), got)
		}
	})

	t.Run("ABlockWithoutACallIsItsOwnCall", func(t *testing.T) {
		t.Parallel()
		got := run(t, func(s *eventscript.Script) []*convov1.Event {
			return []*convov1.Event{s.Start("P", "M", "T", "tool_use", 0, nil), s.Delta("P", "M", "T", `{"a":1}`),
				s.End("P", "M", "T", obj{"name": "lookup"})}
		})
		if types(got) != "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END" || got[0]["toolCallId"] != "T" ||
			got[0]["toolCallName"] != "lookup" || got[1]["delta"] != `{"a":1}` {
			t.Fatalf("%s: %v", types(got), got)
		}
	})

	t.Run("FailedCallKeepsItsOutput", func(t *testing.T) {
		t.Parallel()
		got := run(t, func(s *eventscript.Script) []*convov1.Event {
			return []*convov1.Event{s.Start("P", "M", "T", "tool_use", 0, nil), s.ToolStarted("C", "T", "fetch", obj{}),
				s.End("P", "M", "T", nil), s.ToolDone("C", "T", "fetch", "partial", "timed out")}
		})
		if last := got[len(got)-1]; last["type"] != "TOOL_CALL_RESULT" || last["content"] != "partial\nerror: timed out" {
			t.Fatalf("%s: %v", types(got), got)
		}
	})

	t.Run("ResultBeforeTheBlockEnds", func(t *testing.T) {
		t.Parallel()
		// The walkthrough's order: the call completes, then its block ends.
		got := run(t, func(s *eventscript.Script) []*convov1.Event {
			return []*convov1.Event{s.Start("P", "M", "T", "tool_use", 0, nil), s.Delta("P", "M", "T", "{}"),
				s.ToolStarted("C", "T", "calc", obj{}), s.ToolDone("C", "T", "calc", "42", ""), s.End("P", "M", "T", nil)}
		})
		if types(got) != "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT" {
			t.Fatalf("%s", types(got))
		}
	})
}

func TestTranslatorRunEnds(t *testing.T) {
	t.Parallel()
	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		s := eventscript.New()
		tr := newTranslator("conv", emptySnapshot(), "", "")
		got := feed(t, tr, s.Assistant("M", "P"), s.Queued("P", "M"), s.Started("P", "M"),
			s.Start("P", "M", "Y", "text", 0, nil), s.Delta("P", "M", "Y", "Once upon"),
			s.Start("P", "M", "R", "reasoning", 1, nil), s.Cancelled("P", "M"))
		// Whatever is still open is closed before the run finishes.
		want := "RUN_STARTED MESSAGES_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT REASONING_START REASONING_MESSAGE_START " +
			"TEXT_MESSAGE_END REASONING_MESSAGE_END REASONING_END RUN_FINISHED"
		if types(got) != want {
			t.Fatalf("%s\nwant %s", types(got), want)
		}
		if last := got[len(got)-1]; !reflect.DeepEqual(last["outcome"], obj{"type": "cancelled"}) || last["runId"] != "P" {
			t.Errorf("RUN_FINISHED = %v", last)
		}
		if out := tr.apply(s.Delta("P", "M", "Y", "late")); len(out) != 0 {
			t.Errorf("after the run: %v", out)
		}
	})

	t.Run("Failed", func(t *testing.T) {
		t.Parallel()
		s := eventscript.New()
		tr := newTranslator("conv", emptySnapshot(), "", "")
		got := feed(t, tr, s.Assistant("M", "P"), s.Queued("P", "M"), s.Failed("P", "M", "model unavailable"))
		expect(t, got[2:], obj{"type": "RUN_ERROR", "timestamp": s.At(3), "message": "model unavailable", "code": "PROMPT_FAILED"})
	})
}

func TestTranslatorLateJoiner(t *testing.T) {
	t.Parallel()
	// Joining mid-reply: the snapshot (completed blocks only), then the
	// replayed in-flight block, then the rest.
	snap := &convov1.Snapshot{Messages: []*convov1.Message{
		{Id: "U", Role: "user", Status: "completed", Blocks: []*convov1.Block{{Id: "UB", BlockType: "text", Content: "hi", Status: "completed"}}},
		{Id: "M", Role: "assistant", Status: "processing", PromptId: "P", Blocks: []*convov1.Block{
			{Id: "R", BlockType: "reasoning", Content: "Greet back.", Status: "completed"},
		}},
	}}
	s := eventscript.New()
	s.After(10)
	tr := newTranslator("conv", snap, "", "")
	got := asJSON(t, tr.begin())
	if types(got) != "RUN_STARTED MESSAGES_SNAPSHOT" || got[0]["runId"] != "P" {
		t.Fatalf("begin: %v", got)
	}
	msgs, _ := json.Marshal(got[1]["messages"])
	if want := `[{"content":"hi","id":"U","role":"user"},{"content":"Greet back.","id":"R","metadata":{"convo":{"blockType":"reasoning","messageId":"M"}},"role":"reasoning"}]`; string(msgs) != want {
		t.Errorf("snapshot %s\nwant %s", msgs, want)
	}
	replayStart, replayDelta := s.Start("P", "M", "Y", "text", 1, nil), s.Delta("P", "M", "Y", "Hello, wor")
	replayStart.Replay, replayDelta.Replay = true, true
	got = feed(t, tr, replayStart, replayDelta, s.Delta("P", "M", "Y", "ld!"), s.End("P", "M", "Y", nil), s.Completed("P", "M"))
	if types(got) != "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED" ||
		got[1]["delta"] != "Hello, wor" || got[2]["delta"] != "ld!" {
		t.Fatalf("%s: %v", types(got), got)
	}
}

func TestTranslatorOverlappingPromptsRunInTurn(t *testing.T) {
	t.Parallel()
	s := eventscript.New()
	tr := newTranslator("conv", emptySnapshot(), "", "")
	got := feed(t, tr, s.User("U1", "first"), s.Assistant("M1", "P1"), s.Queued("P1", "M1"), s.Started("P1", "M1"),
		s.Start("P1", "M1", "A", "text", 0, nil), s.Delta("P1", "M1", "A", "one"))
	if types(got) != "RUN_STARTED MESSAGES_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT" {
		t.Fatalf("%s", types(got))
	}

	// A second prompt streams (and ends) while the first still runs: its
	// events wait for its own run.
	d1, d2 := s.Delta("P2", "M2", "B", "t"), s.Delta("P2", "M2", "B", "wo")
	got = feed(t, tr, s.User("U2", "second"), s.Assistant("M2", "P2"), s.Queued("P2", "M2"), s.Started("P2", "M2"),
		s.Start("P2", "M2", "B", "text", 0, nil), d1, d2, s.Delta("P1", "M1", "A", "!"), s.End("P2", "M2", "B", nil),
		s.Completed("P2", "M2"))
	if types(got) != "TEXT_MESSAGE_CONTENT" || got[0]["delta"] != "!" {
		t.Fatalf("while the first runs: %s %v", types(got), got)
	}

	got = feed(t, tr, s.End("P1", "M1", "A", nil), s.Completed("P1", "M1"))
	want := "TEXT_MESSAGE_END RUN_FINISHED RUN_STARTED MESSAGES_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"
	if types(got) != want {
		t.Fatalf("%s\nwant %s", types(got), want)
	}
	if got[1]["runId"] != "P1" || got[2]["runId"] != "P2" || got[7]["runId"] != "P2" {
		t.Errorf("runs: %v %v %v", got[1], got[2], got[7])
	}
	// The second run's snapshot has the first reply and the second
	// message, not the second reply, whose text comes once, in one piece.
	msgs, _ := json.Marshal(got[3]["messages"])
	if w := `[{"content":"first","id":"U1","role":"user"},{"content":"one!","id":"A","metadata":{"convo":{"blockType":"text","messageId":"M1"}},"role":"assistant"},{"content":"second","id":"U2","role":"user"}]`; string(msgs) != w {
		t.Errorf("second run's snapshot %s\nwant %s", msgs, w)
	}
	if got[5]["delta"] != "two" {
		t.Errorf("second reply's text %v", got[5])
	}
	// The hub's events are shared by every subscriber: never modified.
	if d1.GetBlockDelta().Content != "t" || d2.GetBlockDelta().Content != "wo" {
		t.Errorf("queued deltas modified: %v %v", d1, d2)
	}
}

func TestTranslatorOnePrompt(t *testing.T) {
	t.Parallel()
	// POST /v1/agui runs one prompt: others make no events, and the stream
	// is done when its run ends.
	s := eventscript.New()
	tr := newTranslator("conv", emptySnapshot(), "P2", "client-run")
	got := feed(t, tr, s.Assistant("M1", "P1"), s.Queued("P1", "M1"), s.Start("P1", "M1", "A", "text", 0, nil),
		s.Delta("P1", "M1", "A", "other"), s.User("U2", "mine"), s.Assistant("M2", "P2"), s.Queued("P2", "M2"),
		s.Delta("P1", "M1", "A", " reply"), s.Failed("P2", "M2", "no model"))
	if types(got) != "RUN_STARTED MESSAGES_SNAPSHOT RUN_ERROR" || got[0]["runId"] != "client-run" || !tr.done {
		t.Fatalf("%s %v", types(got), got)
	}

	tr = newTranslator("conv", emptySnapshot(), "P", "run")
	if got := asJSON(t, tr.interrupt(interruption(fmt.Errorf("boom")))); types(got) != "RUN_ERROR" || got[0]["code"] != "STREAM_INTERRUPTED" {
		t.Fatalf("interrupted before the run started: %v", got)
	}
}

package worker_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"

	. "github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/demo"
)

// TestDemoModel runs SendMessage → demo model → promptCompleted and reads
// the reply back from the event log.
func TestDemoModel(t *testing.T) {
	t.Parallel()

	t.Run("ReasoningToolUseResultAndText", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		_, res := tb.start(t, Config{})
		s := tb.send(t, uuid.Nil, "What is 6 times 7?", `{}`)
		r := res.wait(t, s.promptID, 20*time.Second)
		if r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		if r.Rounds != 2 {
			t.Errorf("rounds = %d, want 2 (tool call, answer)", r.Rounds)
		}

		events := tb.events(t, s.conversationID)
		var types []string
		blocks := map[uuid.UUID]string{}
		var call map[string]any
		seen := map[conversation.EventKind]int{}
		for _, e := range events {
			seen[e.Kind]++
			p := payload(t, e)
			switch e.Kind {
			case conversation.EventBlockStart:
				types = append(types, p["blockType"].(string))
				blocks[e.BlockID.UUID] = p["blockType"].(string)
			case conversation.EventToolCallStarted:
				if _, ok := blocks[e.BlockID.UUID]; !ok {
					t.Errorf("toolCallStarted before its block's blockStart")
				}
			case conversation.EventToolCallCompleted:
				call = p["toolCall"].(map[string]any)
			}
		}
		if want := []string{"reasoning", "tool_use", "tool_result", "text"}; !slices.Equal(types, want) {
			t.Errorf("block types %v, want %v", types, want)
		}
		if seen[conversation.EventPromptCompleted] != 1 || seen[conversation.EventPromptStarted] != 1 {
			t.Errorf("prompt events: %v", seen)
		}
		if call == nil || call["name"] != "calculator" || call["status"] != "completed" ||
			call["input"].(map[string]any)["expression"] != "6 * 7" || !strings.HasSuffix(call["output"].(string), "42") {
			t.Errorf("tool call = %v", call)
		}

		m := tb.message(t, s)
		if m.Status != conversation.MessageCompleted || len(m.Blocks) != 4 {
			t.Fatalf("message %s with %d blocks", m.Status, len(m.Blocks))
		}
		reasoning, toolUse, result, text := m.Blocks[0], m.Blocks[1], m.Blocks[2], m.Blocks[3]
		if !strings.Contains(reasoning.Content, "calculator") || !strings.Contains(string(reasoning.Metadata), `"signature"`) {
			t.Errorf("reasoning %q, metadata %s", reasoning.Content, reasoning.Metadata)
		}
		if toolUse.Content != `{"expression":"6 * 7"}` || toolUse.ToolCall == nil || toolUse.ToolCall.Status != conversation.ToolCallCompleted {
			t.Errorf("tool_use %q, call %+v", toolUse.Content, toolUse.ToolCall)
		}
		if result.Content != "42" {
			t.Errorf("tool_result = %q, want 42", result.Content)
		}
		var meta map[string]any
		_ = json.Unmarshal(result.Metadata, &meta)
		if meta["tool"] != "calculator" || meta["toolCallId"] != toolUse.ToolCall.ID.String() || meta["durationMs"] == nil {
			t.Errorf("tool_result metadata %s", result.Metadata)
		}
		if !strings.Contains(text.Content, `6 \* 7 = 42`) || len(demoTokens.FindAllString(text.Content, -1)) < 200 {
			t.Errorf("answer (%d tokens): %q", len(demoTokens.FindAllString(text.Content, -1)), text.Content)
		}
		// Every streamed block's deltas add up to its content.
		for _, b := range m.Blocks {
			if got, _ := blockText(t, events, b.ID); got != b.Content {
				t.Errorf("%s block: deltas %q, content %q", b.Type, got, b.Content)
			}
		}
	})

	t.Run("SecondMessageSeesTheFirst", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		_, res := tb.start(t, Config{})
		first := tb.send(t, uuid.Nil, "What is (2 + 3) * 4?", `{"model": "demo"}`)
		res.wait(t, first.promptID, 20*time.Second)
		second := tb.send(t, first.conversationID, "Tell me something about streaming replies.", `{"provider": "demo"}`)
		if r := res.wait(t, second.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		m := tb.message(t, second)
		if !strings.Contains(m.Blocks[0].Content, "message 2 of our conversation") {
			t.Errorf("reasoning does not see the first message: %q", m.Blocks[0].Content)
		}
		if m.Blocks[1].ToolCall == nil || m.Blocks[1].ToolCall.Name != "text_stats" {
			t.Errorf("no arithmetic: want text_stats, got %+v", m.Blocks[1].ToolCall)
		}
	})

	t.Run("StructuredOutput", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		_, res := tb.start(t, Config{})
		s := tb.send(t, uuid.Nil, "What is 2^10?", `{"responseFormat": {"type": "json_object"}}`)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		m := tb.message(t, s)
		last := m.Blocks[len(m.Blocks)-1]
		var out map[string]any
		if last.Type != "structured" || json.Unmarshal([]byte(last.Content), &out) != nil || out["result"] != "1024" {
			t.Errorf("last block %s: %s", last.Type, last.Content)
		}
	})

	t.Run("MaxTokensCutsTheAnswer", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		_, res := tb.start(t, Config{})
		s := tb.send(t, uuid.Nil, "Say something long", `{"maxTokens": 5}`)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		m := tb.message(t, s)
		if len(m.Blocks) != 1 || m.Blocks[0].Type != "reasoning" || len(demoTokens.FindAllString(m.Blocks[0].Content, -1)) != 5 {
			t.Errorf("blocks %+v", m.Blocks)
		}
	})
}

// TestCancel cancels a prompt in the middle of its reply: the worker must
// stop the model and write nothing more within half a second.
func TestCancel(t *testing.T) {
	t.Parallel()

	t.Run("MidReplyStopsWritesPromptly", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		api, wrap := newCountingAPI()
		models := NewModels("demo")
		models.Register("demo", demo.NewModel(demo.Options{TokensPerSecond: 200}), "")
		_, res := tb.start(t, WithWrapAPI(Config{Models: models}, wrap))
		s := tb.send(t, uuid.Nil, "What is 12 * 12?", `{}`)

		// Wait until the answer streams.
		var textBlock uuid.UUID
		eventually(t, 20*time.Second, "the text block to stream", func() bool {
			for _, e := range tb.events(t, s.conversationID) {
				if e.Kind == conversation.EventBlockStart && payload(t, e)["blockType"] == "text" {
					textBlock = e.BlockID.UUID
				}
				if e.Kind == conversation.EventBlockDelta && e.BlockID.UUID == textBlock {
					return true
				}
			}
			return false
		})
		cancelled := time.Now()
		if ok, err := tb.store.CancelPrompt(context.Background(), "local", s.promptID); err != nil || !ok {
			t.Fatalf("cancel: %v %v", ok, err)
		}
		r := res.wait(t, s.promptID, 5*time.Second)
		stopped := time.Since(cancelled)
		if r.Outcome != OutcomeCancelled {
			t.Errorf("outcome %s (%v), want cancelled", r.Outcome, r.Err)
		}
		if stopped > 500*time.Millisecond {
			t.Errorf("the worker took %s to stop", stopped)
		}
		if last := api.lastWrite(); last.Sub(cancelled) > 500*time.Millisecond {
			t.Errorf("last write %s after the cancel", last.Sub(cancelled))
		}
		t.Logf("stopped %s after the cancel; last write %s after it", stopped, api.lastWrite().Sub(cancelled))

		// Nothing after promptCancelled, and the partial reply stays.
		events := tb.events(t, s.conversationID)
		for i, e := range events {
			if e.Kind == conversation.EventPromptCancelled {
				for _, later := range events[i+1:] {
					if later.Kind != conversation.EventMessageUpdated && later.Kind != conversation.EventConversationUpdated {
						t.Errorf("event %s after promptCancelled", later.Kind)
					}
				}
			}
		}
		m := tb.message(t, s)
		text := m.Blocks[len(m.Blocks)-1]
		if m.Status != conversation.MessageCancelled || text.Type != "text" || text.Content == "" || text.Status != conversation.BlockCompleted {
			t.Errorf("after cancel: message %s, last block %s %q", m.Status, text.Type, text.Content)
		}
	})

	t.Run("LostLeaseStopsTheWorker", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		models := NewModels("demo")
		models.Register("demo", demo.NewModel(demo.Options{TokensPerSecond: 100}), "")
		_, res := tb.start(t, Config{Models: models, LeaseSeconds: 5, HeartbeatInterval: 50 * time.Millisecond})
		s := tb.send(t, uuid.Nil, "Hello there", `{}`)
		eventually(t, 20*time.Second, "the prompt to start", func() bool {
			st, _ := tb.prompt(t, s.promptID)
			return st == "running"
		})
		// Someone else holds it now (as after a lease expiry and a
		// reclaim): heartbeat says false, and the worker stops silently.
		if _, err := tb.db.Exec(context.Background(), `UPDATE convo.prompts SET worker = 'someone-else' WHERE id = $1`, s.promptID); err != nil {
			t.Fatal(err)
		}
		r := res.wait(t, s.promptID, 5*time.Second)
		if r.Outcome != OutcomeStopped {
			t.Errorf("outcome %s (%v), want stopped", r.Outcome, r.Err)
		}
		if st, _ := tb.prompt(t, s.promptID); st != "running" {
			t.Errorf("status %s: the worker wrote after losing the prompt", st)
		}
	})

	t.Run("ReplyLongerThanItsLeaseCompletes", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		// Text every 20 ms for 6 s, with a lease of 2 s: only the
		// heartbeats in the batches keep it (every claim reaps expired
		// leases, and the claim loop, with a slot free, polls every 100 ms).
		// (A lease of 1 s ran out once behind PgBouncer's three server
		// connections on a machine running the browser tests beside.)
		_, res := tb.start(t, Config{Models: modelsWith(pacedModel(fastTokens(300), 20*time.Millisecond)),
			Workers: 2, LeaseSeconds: 2, PollInterval: 100 * time.Millisecond})
		s := tb.send(t, uuid.Nil, "take your time", `{}`)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
	})

	t.Run("QueuedPromptIsNeverStarted", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		s := tb.send(t, uuid.Nil, "never mind", `{}`)
		if _, err := tb.store.CancelPrompt(context.Background(), "local", s.promptID); err != nil {
			t.Fatal(err)
		}
		api, wrap := newCountingAPI()
		_, res := tb.start(t, WithWrapAPI(Config{}, wrap))
		other := tb.send(t, uuid.Nil, "but this one", `{}`)
		if r := res.wait(t, other.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		if n := api.count("start_prompt"); n != 1 {
			t.Errorf("%d starts, want 1", n)
		}
	})
}

// TestShutdown stops a pool in the middle of a reply: the prompt fails
// with a message saying so, rather than waiting for its lease to expire.
func TestShutdown(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	models := NewModels("demo")
	models.Register("demo", demo.NewModel(demo.Options{TokensPerSecond: 50}), "")
	p, res := tb.start(t, Config{Models: models, Name: "stopping"})
	s := tb.send(t, uuid.Nil, "Hello", `{}`)
	eventually(t, 20*time.Second, "the prompt to start", func() bool {
		st, _ := tb.prompt(t, s.promptID)
		return st == "running"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r := res.wait(t, s.promptID, time.Second)
	st, errText := tb.prompt(t, s.promptID)
	if r.Outcome != OutcomeFailed || st != "failed" || !strings.Contains(errText, "worker stopping stopped before the reply finished") {
		t.Errorf("outcome %s, status %s, error %q", r.Outcome, st, errText)
	}
}

// TestWorkersInOneProcess runs 30 prompts on 4 workers of one pool: each
// runs exactly once.
func TestWorkersInOneProcess(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var mu sync.Mutex
	runs := map[uuid.UUID]int{}
	_, res := tb.start(t, Config{Workers: 4, OnPromptDone: func(r Result) {
		mu.Lock()
		runs[r.PromptID]++
		mu.Unlock()
	}})
	var prompts []uuid.UUID
	for i := range 30 {
		prompts = append(prompts, tb.send(t, uuid.Nil, "What is "+strings.Repeat("1 + ", i)+"1?", `{}`).promptID)
	}
	for _, id := range prompts {
		if r := res.wait(t, id, 30*time.Second); r.Outcome != OutcomeCompleted {
			t.Errorf("prompt %s: %s %v", id, r.Outcome, r.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range prompts {
		if runs[id] != 1 {
			t.Errorf("prompt %s ran %d times", id, runs[id])
		}
	}
}

// demoTokens splits text as the demo model does: at most six letters or
// digits, or one other character, each with the spaces before it.
var demoTokens = regexp.MustCompile(`\s*[\p{L}\p{N}_]{1,6}|\s*[^\s\p{L}\p{N}_]|\s+`)

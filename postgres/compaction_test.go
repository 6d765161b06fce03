package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// appendMany appends n numbered deltas (some multi-byte) to a block in one
// statement.
func (tb *testBundle) appendMany(t testing.TB, blockID uuid.UUID, prefix string, n int) {
	t.Helper()
	_, err := tb.pool.Exec(context.Background(),
		`SELECT convo.append_block($1, $2 || g || 'é ') FROM generate_series(1, $3::int) g`, blockID, prefix, n)
	if err != nil {
		t.Fatalf("append %d deltas: %v", n, err)
	}
}

// traceStory is what a trace tells: the kinds of its events in order, with
// each run of one block's deltas folded into its text, so a trace read
// before and after compaction can be compared.
func traceStory(t testing.TB, tr conversation.Trace) []string {
	t.Helper()
	var story []string
	var lastDeltaBlock uuid.NullUUID
	for _, e := range tr.Events {
		if e.Kind == conversation.EventBlockDelta && lastDeltaBlock == e.BlockID && len(story) > 0 {
			story[len(story)-1] += deltaContent(t, e)
			continue
		}
		lastDeltaBlock = uuid.NullUUID{}
		if e.Kind == conversation.EventBlockDelta {
			lastDeltaBlock = e.BlockID
			story = append(story, "delta "+e.BlockID.UUID.String()+": "+deltaContent(t, e))
			continue
		}
		story = append(story, string(e.Kind)+" "+string(e.Payload))
	}
	return story
}

func TestCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)

	// A finished reply: reasoning, a tool call with progress, and a
	// 5,000-delta text block.
	r := tb.startReply(t)
	reasoning := tb.startBlock(t, r.promptID, "reasoning")
	tb.appendMany(t, reasoning, "thought ", 100)
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: reasoning}); err != nil {
		t.Fatal(err)
	}
	toolUse := tb.startBlock(t, r.promptID, "tool_use")
	call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: toolUse, Name: "search", Input: json.RawMessage(`{"q":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: call, Output: fmt.Sprintf("step %d; ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: call}); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: toolUse}); err != nil {
		t.Fatal(err)
	}
	text := tb.startBlock(t, r.promptID, "text")
	tb.appendMany(t, text, "token ", 2500)
	// Another block's events between the text block's deltas split them
	// into two runs.
	aside := tb.startBlock(t, r.promptID, "reasoning")
	tb.append(t, aside, "an aside")
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: aside}); err != nil {
		t.Fatal(err)
	}
	tb.appendMany(t, text, "word ", 2500)
	if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
		t.Fatal(err)
	}

	// A reply still running in another conversation is never touched.
	running := tb.startReply(t)
	runningBlock := tb.startBlock(t, running.promptID, "text")
	tb.appendMany(t, runningBlock, "live ", 10)
	runningBefore := tb.events(t, running.conversationID)

	stateBefore := tb.state(t, r.conversationID)
	traceBefore, err := tb.store.Trace(ctx, "local", uuid.NullUUID{UUID: r.promptID, Valid: true}, uuid.NullUUID{})
	if err != nil {
		t.Fatal(err)
	}
	eventsBefore := len(tb.events(t, r.conversationID))

	// Not yet old enough: nothing happens.
	res, err := tb.store.CompactEvents(ctx, time.Hour, 100)
	if err != nil || res.Prompts != 0 || res.EventsRemoved != 0 {
		t.Fatalf("compact after 1h = %+v, %v; want nothing compacted", res, err)
	}

	started := time.Now()
	res, err = tb.store.CompactEvents(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(started)
	// 100 reasoning deltas → 1, 2 × 2,500 text deltas → 2.
	if want := int64(99 + 2*2499); res.Prompts != 1 || res.EventsRemoved != want {
		t.Errorf("compact = %+v; want 1 prompt and %d events removed", res, want)
	}
	events := tb.events(t, r.conversationID)
	if got := eventsBefore - len(events); int64(got) != res.EventsRemoved {
		t.Errorf("the log shrank by %d events, compact reported %d", got, res.EventsRemoved)
	}
	deltas := map[uuid.UUID]int{}
	for _, e := range events {
		if e.Kind == conversation.EventBlockDelta {
			deltas[e.BlockID.UUID]++
		}
	}
	t.Logf("compaction: %d events → %d in %v", eventsBefore, len(events), took)
	if deltas[reasoning] != 1 || deltas[text] != 2 || len(events) > 30 {
		t.Errorf("after compaction: %d events, deltas per block %v; want 1 reasoning delta, 2 text deltas, a few events in all",
			len(events), deltas)
	}

	if got := tb.state(t, r.conversationID); !reflect.DeepEqual(got, stateBefore) {
		t.Errorf("GetConversation changed:\n got %+v\nwant %+v", got, stateBefore)
	}
	traceAfter, err := tb.store.Trace(ctx, "local", uuid.NullUUID{UUID: r.promptID, Valid: true}, uuid.NullUUID{})
	if err != nil {
		t.Fatal(err)
	}
	if before, after := traceStory(t, traceBefore), traceStory(t, traceAfter); !reflect.DeepEqual(before, after) {
		t.Errorf("the trace tells another story:\n got %q\nwant %q", after, before)
	}
	if len(traceAfter.Events) >= len(traceBefore.Events)/100 {
		t.Errorf("trace has %d events after compaction (%d before)", len(traceAfter.Events), len(traceBefore.Events))
	}
	if got := tb.events(t, running.conversationID); !reflect.DeepEqual(got, runningBefore) {
		t.Errorf("a running prompt's events changed")
	}

	// Compacting again does nothing.
	if res, err := tb.store.CompactEvents(ctx, 0, 100); err != nil || res.Prompts != 0 {
		t.Errorf("second compact = %+v, %v; want nothing", res, err)
	}
}

func TestCompactPromptErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	before := tb.fingerprint(t)
	for _, tc := range []struct {
		sql, state, message string
		args                []any
	}{
		{`SELECT convo.compact_prompt($1)`, "CV002", "only finished prompts", []any{r.promptID}},
		{`SELECT convo.compact_prompt($1)`, "CV001", "does not exist", []any{uuid.New()}},
		{`SELECT * FROM convo.compact_events(interval '-1 second')`, "CV003", "older_than", nil},
		{`SELECT * FROM convo.compact_events(interval '1 second', 0)`, "CV003", "max_prompts", nil},
	} {
		_, err := tb.pool.Exec(ctx, tc.sql, tc.args...)
		if pgErr := requireSQLState(t, err, tc.state); !strings.Contains(pgErr.Message, tc.message) {
			t.Errorf("%s: %q does not mention %q", tc.sql, pgErr.Message, tc.message)
		}
	}
	if after := tb.fingerprint(t); after != before {
		t.Errorf("a refused compaction changed something")
	}
}

package db_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"
)

func TestWorkerAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("FullReply", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)

		reasoning := tb.startBlock(t, r.promptID, "reasoning")
		tb.append(t, reasoning, "Let me ")
		tb.append(t, reasoning, "think.")
		if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: reasoning, Metadata: json.RawMessage(`{"signature":"sig"}`)}); err != nil {
			t.Fatal(err)
		}
		toolUse := tb.startBlock(t, r.promptID, "tool_use")
		tb.append(t, toolUse, `{"city":`)
		tb.append(t, toolUse, `"Paris"}`)
		call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: toolUse, Name: "weather", Input: json.RawMessage(`{"city":"Paris","unit":null}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: call, Output: "looking up… "}); err != nil {
			t.Fatal(err)
		}
		final := "18°C"
		if err := tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: call, Output: &final}); err != nil {
			t.Fatal(err)
		}
		if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: toolUse}); err != nil {
			t.Fatal(err)
		}
		structured := tb.startBlock(t, r.promptID, "structured")
		tb.append(t, structured, `{"temp":`)
		tb.append(t, structured, `18}`)
		if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: structured}); err != nil {
			t.Fatal(err)
		}
		text := tb.startBlock(t, r.promptID, "text")
		tb.append(t, text, "It is ")
		tb.append(t, text, "18°C in Paris. 🌤")
		keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: r.promptID, Worker: "w1"})
		if err != nil || !keep {
			t.Fatalf("heartbeat = %v, %v; want true", keep, err)
		}
		if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
			t.Fatal(err)
		}

		st := tb.state(t, r.conversationID)
		if got := len(st.Messages); got != 2 {
			t.Fatalf("messages = %d, want 2", got)
		}
		user, assistant := st.Messages[0], st.Messages[1]
		if user.Role != conversation.RoleUser || user.Status != conversation.MessageCompleted || user.Blocks[0].Content != "hello" {
			t.Errorf("user message = %+v", user)
		}
		if assistant.Status != conversation.MessageCompleted || assistant.PromptID.UUID != r.promptID {
			t.Errorf("assistant message = %+v", assistant)
		}
		var got []string
		for _, b := range assistant.Blocks {
			if b.Status != conversation.BlockCompleted {
				t.Errorf("block %s still %s", b.Type, b.Status)
			}
			got = append(got, b.Type+"="+b.Content)
		}
		want := []string{"reasoning=Let me think.", `tool_use={"city":"Paris"}`, `structured={"temp":18}`, "text=It is 18°C in Paris. 🌤"}
		if !slices.Equal(got, want) {
			t.Errorf("blocks = %q\nwant %q", got, want)
		}
		if md := string(assistant.Blocks[0].Metadata); md != `{"signature": "sig"}` {
			t.Errorf("reasoning metadata = %s", md)
		}
		tc := assistant.Blocks[1].ToolCall
		if tc == nil || tc.Name != "weather" || tc.Status != conversation.ToolCallCompleted || tc.Output != "looking up… 18°C" || tc.EndedAt == nil {
			t.Errorf("tool call = %+v", tc)
		}
		if tc != nil && string(tc.Input) != `{"city": "Paris", "unit": null}` {
			t.Errorf("tool input = %s: nested nulls must survive", tc.Input)
		}
		if st.Conversation.Title != "hello" || st.Conversation.ActivePromptID.Valid {
			t.Errorf("conversation = %+v", st.Conversation)
		}

		events := tb.events(t, r.conversationID)
		wantKinds := []string{
			"messageCreated", "messageCreated", "promptQueued", "conversationUpdated",
			"promptStarted", "messageUpdated",
			"blockStart", "blockDelta", "blockDelta", "blockEnd",
			"blockStart", "blockDelta", "blockDelta", "toolCallStarted", "toolCallProgress", "toolCallCompleted", "blockEnd",
			"blockStart", "blockDelta", "blockDelta", "blockEnd",
			"blockStart", "blockDelta", "blockDelta", "blockEnd",
			"promptCompleted", "messageUpdated", "conversationUpdated",
		}
		if !slices.Equal(kinds(events), wantKinds) {
			t.Errorf("event kinds = %q\nwant %q", kinds(events), wantKinds)
		}
		for i, e := range events {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
		}
		if st.Seq != int64(len(events)) {
			t.Errorf("state seq = %d, want %d", st.Seq, len(events))
		}
	})

	t.Run("CompleteEndsOpenBlocksAndFailsOpenToolCalls", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		text := tb.startBlock(t, r.promptID, "text")
		tb.append(t, text, "partial")
		toolUse := tb.startBlock(t, r.promptID, "tool_use")
		if _, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: toolUse, Name: "calc", Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
			t.Fatal(err)
		}
		st := tb.state(t, r.conversationID)
		blocks := st.Messages[1].Blocks
		if blocks[0].Status != conversation.BlockCompleted || blocks[0].Content != "partial" {
			t.Errorf("text block = %+v", blocks[0])
		}
		if tc := blocks[1].ToolCall; tc.Status != conversation.ToolCallFailed || !strings.Contains(tc.Error, "prompt completed") {
			t.Errorf("tool call = %+v", tc)
		}
		if len(st.Streaming()) != 0 {
			t.Errorf("blocks still streaming after complete_prompt: %+v", st.Streaming())
		}
	})

	for _, tc := range []struct {
		name   string
		status conversation.PromptStatus
		finish func(tb *testBundle, promptID uuid.UUID) error
	}{
		{"FailEndsOpenBlocks", conversation.PromptFailed, func(tb *testBundle, id uuid.UUID) error {
			return tb.api.PromptFail(ctx, apiq.PromptFailParams{PromptID: id, Error: "model exploded"})
		}},
		{"CancelEndsOpenBlocksAndKeepsPartialReply", conversation.PromptCancelled, func(tb *testBundle, id uuid.UUID) error {
			cancelled, err := tb.store.CancelPrompt(ctx, "local", id)
			if err == nil && !cancelled {
				t.Error("first cancel returned false")
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			r := tb.startReply(t)
			text := tb.startBlock(t, r.promptID, "text")
			tb.append(t, text, "half a thought")
			if err := tc.finish(tb, r.promptID); err != nil {
				t.Fatal(err)
			}
			st := tb.state(t, r.conversationID)
			m := st.Messages[1]
			if string(m.Status) != string(tc.status) {
				t.Errorf("message status = %s, want %s", m.Status, tc.status)
			}
			if b := m.Blocks[0]; b.Status != conversation.BlockCompleted || b.Content != "half a thought" {
				t.Errorf("block = %+v", b)
			}
			if st.Conversation.ActivePromptID.Valid {
				t.Errorf("active prompt still set: %v", st.Conversation.ActivePromptID)
			}
			keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: r.promptID, Worker: "w1"})
			if err != nil || keep {
				t.Errorf("heartbeat after end = %v, %v; want false", keep, err)
			}
		})
	}

	t.Run("CancelTwiceIsHarmless", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.sendMessage(t, uuid.Nil, "hi")
		if ok, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil || !ok {
			t.Fatalf("cancel queued prompt = %v, %v", ok, err)
		}
		before := tb.fingerprint(t)
		if ok, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil || ok {
			t.Fatalf("second cancel = %v, %v; want false, nil", ok, err)
		}
		if after := tb.fingerprint(t); after != before {
			t.Error("second cancel changed state")
		}
	})

	t.Run("RetriedDeltaSeqIsAppliedOnce", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		b := tb.startBlock(t, r.promptID, "text")
		seq := func(n int32) *int32 { return &n }
		for _, call := range []struct {
			delta string
			seq   int32
		}{{"a", 1}, {"b", 2}, {"b", 2}, {"a", 1}, {"c", 3}, {"c", 3}} {
			if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: b, Delta: call.delta, DeltaSeq: seq(call.seq)}); err != nil {
				t.Fatalf("append %q #%d: %v", call.delta, call.seq, err)
			}
		}
		// Calls without delta_seq still append, and count.
		tb.append(t, b, "d")
		if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: b, Delta: "e", DeltaSeq: seq(5)}); err != nil {
			t.Fatal(err)
		}
		st := tb.state(t, r.conversationID)
		if got := st.Messages[1].Blocks[0].Content; got != "abcde" {
			t.Errorf("content = %q, want each delta once", got)
		}
		var deltas int
		for _, e := range tb.events(t, r.conversationID) {
			if e.Kind == conversation.EventBlockDelta {
				deltas++
			}
		}
		if deltas != 5 {
			t.Errorf("%d blockDelta events, want 5", deltas)
		}
	})

	t.Run("EmptyDeltaWritesNoEvent", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		b := tb.startBlock(t, r.promptID, "text")
		before := len(tb.events(t, r.conversationID))
		tb.append(t, b, "")
		if after := len(tb.events(t, r.conversationID)); after != before {
			t.Error("empty delta wrote an event")
		}
	})
}

// TestWorkerAPIIllegalCalls checks that every illegal call raises its
// documented SQLSTATE with a message that says what was wrong, and leaves
// no row and no event behind.
func TestWorkerAPIIllegalCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	unknown := uuid.New()

	cases := []struct {
		name     string
		sqlstate string
		message  string
		// prepare builds the state and returns the illegal call.
		prepare func(t *testing.T, tb *testBundle) func() error
	}{
		{"StartUnknownPrompt", "CV001", "does not exist", func(t *testing.T, tb *testBundle) func() error {
			return func() error { return tb.api.PromptStart(ctx, unknown) }
		}},
		{"StartRunningPrompt", "CV002", "is running, not queued", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			return func() error { return tb.api.PromptStart(ctx, r.promptID) }
		}},
		{"StartBlockOnQueuedPrompt", "CV002", "queued, not running", func(t *testing.T, tb *testBundle) func() error {
			r := tb.sendMessage(t, uuid.Nil, "hi")
			return func() error {
				_, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: r.promptID, BlockType: "text", Metadata: json.RawMessage(`{}`)})
				return err
			}
		}},
		{"StartBlockBadType", "CV003", "lower_snake", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			return func() error {
				_, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: r.promptID, BlockType: "Text Block", Metadata: json.RawMessage(`{}`)})
				return err
			}
		}},
		{"StartBlockMetadataNotObject", "CV003", "metadata must be a JSON object", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			return func() error {
				_, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: r.promptID, BlockType: "text", Metadata: json.RawMessage(`[1]`)})
				return err
			}
		}},
		{"AppendUnknownBlock", "CV001", "does not exist", func(t *testing.T, tb *testBundle) func() error {
			return func() error { return tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: unknown, Delta: "x"}) }
		}},
		{"AppendEndedBlock", "CV002", "has ended", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "text")
			if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: b}); err != nil {
				t.Fatal(err)
			}
			return func() error { return tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: b, Delta: "x"}) }
		}},
		{"AppendUserMessageBlock", "CV002", "user message", func(t *testing.T, tb *testBundle) func() error {
			r := tb.sendMessage(t, uuid.Nil, "hi")
			st := tb.state(t, r.conversationID)
			return func() error {
				return tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: st.Messages[0].Blocks[0].ID, Delta: "x"})
			}
		}},
		{"AppendAfterPromptCompleted", "CV002", "is completed, not running", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "text")
			if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
			return func() error { return tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: b, Delta: "x"}) }
		}},
		{"AppendAfterPromptCancelled", "CV002", "is cancelled, not running", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "text")
			if _, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil {
				t.Fatal(err)
			}
			return func() error { return tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: b, Delta: "x"}) }
		}},
		{"AppendSkippingADeltaSeq", "CV002", "delta_seq 3 skips ahead", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "text")
			one := int32(1)
			if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: b, Delta: "x", DeltaSeq: &one}); err != nil {
				t.Fatal(err)
			}
			three := int32(3)
			return func() error {
				return tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: b, Delta: "y", DeltaSeq: &three})
			}
		}},
		{"EndStructuredBlockWithInvalidJSON", "CV003", "does not hold valid JSON", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "structured")
			tb.append(t, b, `{"a":`)
			return func() error { return tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: b}) }
		}},
		{"EndBlockTwice", "CV002", "has ended", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "text")
			if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: b}); err != nil {
				t.Fatal(err)
			}
			return func() error { return tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: b}) }
		}},
		{"ToolCallOnTextBlock", "CV002", "not tool_use", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "text")
			return func() error {
				_, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: b, Name: "calc", Input: json.RawMessage(`{}`)})
				return err
			}
		}},
		{"SecondToolCallOnBlock", "CV002", "already has a tool call", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "tool_use")
			if _, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: b, Name: "calc", Input: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			return func() error {
				_, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: b, Name: "calc", Input: json.RawMessage(`{}`)})
				return err
			}
		}},
		{"ToolCallEmptyName", "CV003", "name must not be empty", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "tool_use")
			return func() error {
				_, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: b, Name: "", Input: json.RawMessage(`{}`)})
				return err
			}
		}},
		{"ProgressOnCompletedToolCall", "CV002", "has already completed", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "tool_use")
			call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: b, Name: "calc", Input: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			if err := tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: call}); err != nil {
				t.Fatal(err)
			}
			return func() error {
				return tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: call, Output: "more"})
			}
		}},
		{"CompleteUnknownToolCall", "CV001", "does not exist", func(t *testing.T, tb *testBundle) func() error {
			return func() error { return tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: unknown}) }
		}},
		{"FailToolCallWithoutError", "CV003", "error must not be empty", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			b := tb.startBlock(t, r.promptID, "tool_use")
			call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: b, Name: "calc", Input: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			return func() error { return tb.api.ToolCallFail(ctx, apiq.ToolCallFailParams{ToolCallID: call, Error: ""}) }
		}},
		{"CompleteQueuedPrompt", "CV002", "queued, not running", func(t *testing.T, tb *testBundle) func() error {
			r := tb.sendMessage(t, uuid.Nil, "hi")
			return func() error { return tb.api.PromptComplete(ctx, r.promptID) }
		}},
		{"CompletePromptTwice", "CV002", "is completed, not running", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
			return func() error { return tb.api.PromptComplete(ctx, r.promptID) }
		}},
		{"FailPromptWithoutError", "CV003", "error must not be empty", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			return func() error { return tb.api.PromptFail(ctx, apiq.PromptFailParams{PromptID: r.promptID, Error: ""}) }
		}},
		{"FailCompletedPrompt", "CV002", "already completed", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
			return func() error {
				return tb.api.PromptFail(ctx, apiq.PromptFailParams{PromptID: r.promptID, Error: "late"})
			}
		}},
		{"ClaimWithoutWorkerName", "CV003", "worker must be a non-empty name", func(t *testing.T, tb *testBundle) func() error {
			tb.sendMessage(t, uuid.Nil, "hi")
			return func() error {
				_, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "", LeaseSeconds: 30})
				return err
			}
		}},
		{"ClaimWithZeroLease", "CV003", "lease_seconds must be between", func(t *testing.T, tb *testBundle) func() error {
			tb.sendMessage(t, uuid.Nil, "hi")
			return func() error {
				_, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w", LeaseSeconds: 0})
				return err
			}
		}},
		{"HeartbeatUnknownPrompt", "CV001", "does not exist", func(t *testing.T, tb *testBundle) func() error {
			return func() error {
				_, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: unknown, Worker: "w"})
				return err
			}
		}},
		{"CancelCompletedPrompt", "CV002", "already completed", func(t *testing.T, tb *testBundle) func() error {
			r := tb.startReply(t)
			if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
			return func() error {
				_, err := tb.q.PromptCancel(ctx, dbq.PromptCancelParams{PromptID: r.promptID, UserID: "local"})
				return err
			}
		}},
		{"SendBlankText", "CV003", "text must not be empty or only whitespace", func(t *testing.T, tb *testBundle) func() error {
			return func() error {
				_, err := tb.api.MessageSend(ctx, apiq.MessageSendParams{OwnerID: "local", Text: " \n\t ", ModelConfigs: json.RawMessage(`[{}]`)})
				return err
			}
		}},
		{"SendZeroWidthText", "CV003", "text must not be empty or only whitespace, control, zero-width, bidi", func(t *testing.T, tb *testBundle) func() error {
			return func() error {
				_, err := tb.api.MessageSend(ctx, apiq.MessageSendParams{OwnerID: "local", Text: "\u200b\u200c\u200d\u2060\ufeff", ModelConfigs: json.RawMessage(`[{}]`)})
				return err
			}
		}},
		{"SendBidiControlText", "CV003", "text must not be empty or only whitespace, control, zero-width, bidi", func(t *testing.T, tb *testBundle) func() error {
			return func() error {
				_, err := tb.api.MessageSend(ctx, apiq.MessageSendParams{OwnerID: "local", Text: "\u202e\u2066\u200f \x1b", ModelConfigs: json.RawMessage(`[{}]`)})
				return err
			}
		}},
		{"CreateTitleWithNewline", "CV003", "title must not contain control characters", func(t *testing.T, tb *testBundle) func() error {
			return func() error {
				_, err := tb.q.ConversationCreate(ctx, dbq.ConversationCreateParams{OwnerID: "local", Title: "two\r\nlines"})
				return err
			}
		}},
		{"CreateTitleZeroWidth", "CV003", "title must not be empty or only whitespace, zero-width", func(t *testing.T, tb *testBundle) func() error {
			return func() error {
				_, err := tb.q.ConversationCreate(ctx, dbq.ConversationCreateParams{OwnerID: "local", Title: "\u200b"})
				return err
			}
		}},
		{"RenameTitleWithEscape", "CV003", "title must not contain control characters", func(t *testing.T, tb *testBundle) func() error {
			r := tb.sendMessage(t, uuid.Nil, "mine")
			return func() error {
				return tb.q.ConversationRename(ctx, dbq.ConversationRenameParams{OwnerID: "local", ID: r.conversationID, Title: "\x1b[2Jbell\a"})
			}
		}},
		{"RenameTitleBidiOnly", "CV003", "title must not be empty or only whitespace, zero-width, bidi", func(t *testing.T, tb *testBundle) func() error {
			r := tb.sendMessage(t, uuid.Nil, "mine")
			return func() error {
				return tb.q.ConversationRename(ctx, dbq.ConversationRenameParams{OwnerID: "local", ID: r.conversationID, Title: "\u202e\u2069"})
			}
		}},
		{"SendToForeignConversation", "CV001", "does not exist", func(t *testing.T, tb *testBundle) func() error {
			r := tb.sendMessage(t, uuid.Nil, "mine")
			return func() error {
				_, err := tb.api.MessageSend(ctx, apiq.MessageSendParams{
					OwnerID: "mallory", ConversationID: uuid.NullUUID{UUID: r.conversationID, Valid: true},
					Text: "hi", ModelConfigs: json.RawMessage(`[{}]`),
				})
				return err
			}
		}},
		{"SendThreeModelConfigs", "CV003", "one or two objects", func(t *testing.T, tb *testBundle) func() error {
			return func() error {
				_, err := tb.api.MessageSend(ctx, apiq.MessageSendParams{OwnerID: "local", Text: "hi", ModelConfigs: json.RawMessage(`[{},{},{}]`)})
				return err
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			call := tc.prepare(t, tb)
			before := tb.fingerprint(t)
			pgErr := requireSQLState(t, call(), tc.sqlstate)
			if !strings.Contains(pgErr.Message, tc.message) {
				t.Errorf("message %q does not say %q", pgErr.Message, tc.message)
			}
			if after := tb.fingerprint(t); after != before {
				t.Errorf("illegal call changed state:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

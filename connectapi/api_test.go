package connectapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

func TestSendMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)

	first := tb.send(t, tb.client, "", "Plan a trip to Lisbon\nwith three days")
	second := tb.send(t, tb.client, first.ConversationId, "And a day trip?")
	if second.ConversationId != first.ConversationId {
		t.Fatalf("second message went to %s, want %s", second.ConversationId, first.ConversationId)
	}
	res, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: first.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	got := res.Msg
	if got.Conversation.Title != "Plan a trip to Lisbon" {
		t.Errorf("title = %q, want the first line of the first message", got.Conversation.Title)
	}
	// The first reply is still queued: the second message waits its turn
	// (the server's send policy, enqueue), and the first stays active.
	if !second.Queued || got.Conversation.ActivePromptId != first.PromptId {
		t.Errorf("second send queued %v, active prompt = %s; want queued, %s", second.Queued, got.Conversation.ActivePromptId, first.PromptId)
	}
	var summary []string
	for _, m := range got.Messages {
		summary = append(summary, m.Role+"/"+m.Status)
	}
	if want := []string{"user/completed", "assistant/pending", "user/completed", "assistant/pending"}; !slices.Equal(summary, want) {
		t.Errorf("messages = %v, want %v", summary, want)
	}
	if u := got.Messages[0]; u.Id != first.UserMessageId || len(u.Blocks) != 1 || u.Blocks[0].Content != "Plan a trip to Lisbon\nwith three days" {
		t.Errorf("user message = %v", u)
	}
	if a := got.Messages[1]; a.Id != first.AssistantMessageId || a.PromptId != first.PromptId {
		t.Errorf("assistant message = %v", a)
	}
	if got.Seq == 0 {
		t.Error("seq = 0")
	}
}

func TestGetConversationIncludesStreamingBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	sent := tb.send(t, tb.client, "", "hi")
	id := uuid.MustParse(sent.PromptId)
	if _, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w", LeaseSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.PromptStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	block, err := tb.api.BlockStart(ctx, apiq.BlockStartParams{PromptID: id, BlockType: "text", Metadata: []byte(`{"lang":"en"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"Hel", "lo, ", "world"} {
		if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: d}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	a := res.Msg.Messages[1]
	if a.Status != "processing" || len(a.Blocks) != 1 {
		t.Fatalf("assistant = %v", a)
	}
	b := a.Blocks[0]
	if b.Content != "Hello, world" || b.Status != "streaming" || b.Metadata.GetFields()["lang"].GetStringValue() != "en" {
		t.Errorf("streaming block = %v", b)
	}
}

func TestListConversations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("NewestFirstAcrossPages", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		var want []string
		for i := range 25 {
			want = append(want, tb.send(t, tb.client, "", fmt.Sprintf("conversation %d", i)).ConversationId)
		}
		slices.Reverse(want)
		var got []string
		token := ""
		for pages := 0; ; pages++ {
			res, err := tb.client.ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{PageSize: 10, PageToken: token}))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Msg.Conversations {
				got = append(got, c.Id)
				if c.Title == "" || c.LastMessageAt == nil || c.CreatedAt == nil {
					t.Errorf("conversation missing fields: %v", c)
				}
			}
			token = res.Msg.NextPageToken
			if token == "" {
				if pages != 2 {
					t.Errorf("%d pages, want 3", pages+1)
				}
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("listed %v\nwant %v", got, want)
		}
	})

	t.Run("StableUnderConcurrentInserts", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		var existing []string
		for i := range 30 {
			existing = append(existing, tb.send(t, tb.client, "", fmt.Sprintf("old %d", i)).ConversationId)
		}
		// Page through while new conversations keep arriving: every
		// conversation that existed before is listed exactly once.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tb.send(t, tb.client, "", fmt.Sprintf("new %d", i))
			}
		}()
		seen := map[string]int{}
		token := ""
		for {
			res, err := tb.client.ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{PageSize: 4, PageToken: token}))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Msg.Conversations {
				seen[c.Id]++
			}
			if token = res.Msg.NextPageToken; token == "" {
				break
			}
		}
		close(stop)
		wg.Wait()
		for _, id := range existing {
			if seen[id] != 1 {
				t.Errorf("conversation %s listed %d times", id, seen[id])
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("conversation %s listed %d times", id, n)
			}
		}
	})
}

func TestCancelPrompt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	sent := tb.send(t, tb.client, "", "hi")
	cancel := func(id string) (*connect.Response[convov1.CancelPromptResponse], error) {
		return tb.client.CancelPrompt(ctx, connect.NewRequest(&convov1.CancelPromptRequest{PromptId: id}))
	}
	res, err := cancel(sent.PromptId)
	if err != nil || !res.Msg.Cancelled {
		t.Fatalf("cancel = %v, %v", res, err)
	}
	if res, err := cancel(sent.PromptId); err != nil || res.Msg.Cancelled {
		t.Fatalf("second cancel = %v, %v; want harmless false", res, err)
	}
	state, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	if s := state.Msg.Messages[1].Status; s != "cancelled" {
		t.Errorf("message status = %s", s)
	}

	done := tb.send(t, tb.client, sent.ConversationId, "again")
	tb.writeReply(t, done.PromptId, "ok")
	_, err = cancel(done.PromptId)
	requireCode(t, err, connect.CodeFailedPrecondition)
}

func TestConversationManagement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)

	created, err := tb.client.CreateConversation(ctx, connect.NewRequest(&convov1.CreateConversationRequest{Title: "  Scratch  "}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.Conversation.Id
	if created.Msg.Conversation.Title != "Scratch" {
		t.Errorf("title = %q", created.Msg.Conversation.Title)
	}
	renamed, err := tb.client.RenameConversation(ctx, connect.NewRequest(&convov1.RenameConversationRequest{ConversationId: id, Title: "Recipes"}))
	if err != nil || renamed.Msg.Conversation.Title != "Recipes" {
		t.Fatalf("rename = %v, %v", renamed, err)
	}
	sent := tb.send(t, tb.client, id, "first message keeps the explicit title")
	cleared, err := tb.client.ClearConversation(ctx, connect.NewRequest(&convov1.ClearConversationRequest{ConversationId: id}))
	if err != nil || cleared.Msg.Conversation.Title != "Recipes" || cleared.Msg.Conversation.ActivePromptId != "" {
		t.Fatalf("clear = %v, %v", cleared, err)
	}
	state, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: id}))
	if err != nil || len(state.Msg.Messages) != 0 {
		t.Fatalf("after clear: %v, %v", state, err)
	}
	// The queued prompt was cancelled (its worker is told), and the log
	// says history was cleared.
	events, err := tb.store.EventsAfter(ctx, uuid.MustParse(id), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, string(e.Kind))
	}
	if !slices.Contains(kinds, "promptCancelled") || kinds[len(kinds)-1] != "historyCleared" {
		t.Errorf("events = %v", kinds)
	}
	if _, err := tb.client.CancelPrompt(ctx, connect.NewRequest(&convov1.CancelPromptRequest{PromptId: sent.PromptId})); err == nil {
		t.Error("cleared prompt still cancellable")
	}

	if _, err := tb.client.DeleteConversation(ctx, connect.NewRequest(&convov1.DeleteConversationRequest{ConversationId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: id}))
	requireCode(t, err, connect.CodeNotFound)
	_, err = tb.client.DeleteConversation(ctx, connect.NewRequest(&convov1.DeleteConversationRequest{ConversationId: id}))
	requireCode(t, err, connect.CodeNotFound)
}

func TestFeedback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	sent := tb.send(t, tb.client, "", "hi")
	tb.writeReply(t, sent.PromptId, "hello")

	rate := func(id string, r convov1.Rating, comment string) (*connect.Response[convov1.SubmitFeedbackResponse], error) {
		return tb.client.SubmitFeedback(ctx, connect.NewRequest(&convov1.SubmitFeedbackRequest{MessageId: id, Rating: r, Comment: comment}))
	}
	if _, err := rate(sent.AssistantMessageId, convov1.Rating_RATING_DOWN, "too short"); err != nil {
		t.Fatal(err)
	}
	res, err := rate(sent.AssistantMessageId, convov1.Rating_RATING_UP, "")
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Msg.Message.Feedback; f.GetRating() != convov1.Rating_RATING_UP || f.GetComment() != "" || f.GetCreatedAt() == nil {
		t.Errorf("feedback = %v, want the second rating to replace the first", f)
	}
	state, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	if f := state.Msg.Messages[1].Feedback; f.GetRating() != convov1.Rating_RATING_UP {
		t.Errorf("GetConversation feedback = %v", f)
	}
	events, err := tb.store.EventsAfter(ctx, uuid.MustParse(sent.ConversationId), state.Msg.Seq-1, 10)
	if err != nil || len(events) != 1 || events[0].Kind != "messageUpdated" {
		t.Fatalf("last event = %+v, %v; want messageUpdated", events, err)
	}

	_, err = rate(sent.UserMessageId, convov1.Rating_RATING_UP, "")
	requireCode(t, err, connect.CodeFailedPrecondition)
}

func TestComparison(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	temp := 0.2
	res, err := tb.client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
		Text:         "Which is better?",
		Model:        &convov1.ModelConfig{Provider: "demo", Model: "small"},
		CompareModel: &convov1.ModelConfig{Provider: "demo", Model: "large", Temperature: &temp},
	}))
	if err != nil {
		t.Fatal(err)
	}
	sent := res.Msg
	if sent.ComparisonId == "" || sent.ComparePromptId == "" || sent.ComparePromptId == sent.PromptId {
		t.Fatalf("send = %v", sent)
	}
	state, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.ConversationId}))
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Msg.Messages) != 3 {
		t.Fatalf("%d messages, want user + two replies", len(state.Msg.Messages))
	}
	for i, slot := range []string{"a", "b"} {
		m := state.Msg.Messages[i+1]
		if m.ComparisonId != sent.ComparisonId || m.ComparisonSlot != slot {
			t.Errorf("reply %s = %v", slot, m)
		}
	}
	vote := func(p convov1.Preference) *convov1.Comparison {
		t.Helper()
		res, err := tb.client.VoteComparison(ctx, connect.NewRequest(&convov1.VoteComparisonRequest{ComparisonId: sent.ComparisonId, Preference: p}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.Comparison
	}
	first := vote(convov1.Preference_PREFERENCE_A)
	second := vote(convov1.Preference_PREFERENCE_B)
	if second.Preference != convov1.Preference_PREFERENCE_B || second.VotedAt.AsTime().Before(first.VotedAt.AsTime()) {
		t.Errorf("re-vote = %v", second)
	}
	list, err := tb.client.ListComparisons(ctx, connect.NewRequest(&convov1.ListComparisonsRequest{ConversationId: sent.ConversationId}))
	if err != nil || len(list.Msg.Comparisons) != 1 {
		t.Fatalf("list = %v, %v", list, err)
	}
	c := list.Msg.Comparisons[0]
	if c.Preference != convov1.Preference_PREFERENCE_B || c.A.PromptId != sent.PromptId || c.B.PromptId != sent.ComparePromptId ||
		c.A.ModelConfig.GetModel() != "small" || c.B.ModelConfig.GetModel() != "large" || c.B.ModelConfig.GetTemperature() != 0.2 ||
		c.UserMessageId != sent.UserMessageId || c.A.Status != "queued" {
		t.Errorf("listed comparison = %v", c)
	}
	// Both prompts reach workers, each stored with its configuration.
	var models []string
	for range 2 {
		claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		var cfg struct{ Model string }
		if err := json.Unmarshal(claimed[0].ModelConfig, &cfg); err != nil {
			t.Fatal(err)
		}
		models = append(models, cfg.Model)
	}
	slices.Sort(models)
	if !slices.Equal(models, []string{"large", "small"}) {
		t.Errorf("claimed models %v, want large and small", models)
	}
}

func TestTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	sent := tb.send(t, tb.client, "", "hi")
	tb.writeReply(t, sent.PromptId, "hello there")

	for name, req := range map[string]*convov1.GetTraceRequest{
		"ByPrompt":  {Target: &convov1.GetTraceRequest_PromptId{PromptId: sent.PromptId}},
		"ByMessage": {Target: &convov1.GetTraceRequest_MessageId{MessageId: sent.AssistantMessageId}},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := tb.client.GetTrace(ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Msg.Trace
			if tr.Prompt.Id != sent.PromptId || tr.Prompt.Status != "completed" || tr.Duration == nil || tr.QueueTime == nil {
				t.Fatalf("trace = %v", tr)
			}
			var kinds []string
			var prev int64
			for _, e := range tr.Events {
				if e.Seq <= prev || e.CreatedAt == nil {
					t.Errorf("event %v out of order or without time", e)
				}
				prev = e.Seq
				kinds = append(kinds, fmt.Sprintf("%T", e.Kind))
			}
			want := []string{
				"*convov1.Event_MessageCreated", "*convov1.Event_PromptQueued", "*convov1.Event_PromptStarted",
				"*convov1.Event_MessageUpdated", "*convov1.Event_BlockStart", "*convov1.Event_BlockDelta",
				"*convov1.Event_BlockEnd", "*convov1.Event_PromptCompleted", "*convov1.Event_MessageUpdated",
			}
			if !slices.Equal(kinds, want) {
				t.Errorf("trace events = %v\nwant %v", kinds, want)
			}
			if d := tr.Events[5].GetBlockDelta().GetContent(); d != "hello there" {
				t.Errorf("delta = %q", d)
			}
		})
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setupAuth(t)
	alice, bob := tb.clientAs(tokenFor(t, "alice")), tb.clientAs(tokenFor(t, "bob"))

	strong := tb.send(t, alice, "", "Sourdough bread: feed the sourdough starter, then bake the sourdough loaf")
	weak := tb.send(t, alice, "", "I had bread with sourdough flavour once")
	tb.send(t, alice, "", "Nothing about baking here")
	tb.send(t, bob, "", "Bob's sourdough secrets")
	// A reply's text is searchable too.
	tb.writeReply(t, weak.PromptId, "Sourdough is a fermented bread.")

	res, err := alice.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: "sourdough"}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res.Msg.Results {
		ids = append(ids, r.MessageId)
		if r.ConversationTitle == "" || len(r.Highlights) == 0 {
			t.Errorf("result without title or highlights: %v", r)
		}
		for _, h := range r.Highlights {
			word := string([]rune(r.Snippet)[h.Start:h.End])
			if word != "Sourdough" && word != "sourdough" {
				t.Errorf("highlight %q in %q is not the match", word, r.Snippet)
			}
		}
	}
	if len(ids) != 3 || ids[0] != strong.UserMessageId {
		t.Fatalf("results %v: want alice's 3 matching messages, the one with three matches first (%s)", ids, strong.UserMessageId)
	}
	for _, r := range res.Msg.Results {
		if r.Snippet == "Bob's sourdough secrets" {
			t.Error("alice sees bob's message")
		}
	}
	bobs, err := bob.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: "sourdough"}))
	if err != nil || len(bobs.Msg.Results) != 1 {
		t.Fatalf("bob's results = %v, %v", bobs, err)
	}
}

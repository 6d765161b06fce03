package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// seen is one event as the SDK read it: its number, type and JSON.
type seen struct {
	seq  int64
	typ  string
	json string
}

// readUntil reads events until stop says so (or the stream ends).
func readUntil(t *testing.T, s *ssestream.Stream[responses.ResponseStreamEventUnion], stop func(responses.ResponseStreamEventUnion) bool) []seen {
	t.Helper()
	var out []seen
	for s.Next() {
		e := s.Current()
		out = append(out, seen{e.SequenceNumber, e.Type, e.RawJSON()})
		if stop(e) {
			return out
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return out
}

func terminal(e responses.ResponseStreamEventUnion) bool {
	switch e.Type {
	case "response.completed", "response.failed", "response.incomplete":
		return true
	}
	return false
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// A background streamed response read half, dropped and resumed after
// the last sequence_number the client saw: nothing repeats, nothing is
// missing, the terminal event's response is GET's and its text the
// conversation's. A replay from the start after the reply ended makes
// the live run's events again, number for number and byte for byte, and
// so does one after compaction merged the reply's deltas.
func TestStreamResumeAndReplayAreStable(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("tell me")},
		Background: openaisdk.Bool(true),
	})
	live := readUntil(t, s, func(e responses.ResponseStreamEventUnion) bool { return e.Type == "response.queued" })
	if len(live) != 2 || live[0].typ != "response.created" || live[0].seq != 0 || live[1].seq != 1 {
		t.Fatalf("the stream starts %v; want response.created 0, response.queued 1", live)
	}
	var created responses.ResponseCreatedEvent
	if err := json.Unmarshal([]byte(live[0].json), &created); err != nil {
		t.Fatal(err)
	}
	id := created.Response.ID
	p := promptOf(t, id)
	tb.StartPrompt(t, p)
	think := tb.StartBlock(t, p, "reasoning", "{}")
	tb.AppendText(t, think, "hm", "m")
	tb.EndBlock(t, think)
	b := tb.StartBlock(t, p, "text", "{}")
	tb.AppendText(t, b, "Once ", "upon ")
	deltas := 0
	live = append(live, readUntil(t, s, func(e responses.ResponseStreamEventUnion) bool {
		if e.Type == "response.output_text.delta" {
			deltas++
		}
		return deltas == 2
	})...)
	s.Close() // the client goes away mid-reply
	tb.AppendText(t, b, "a ", "time", " …")
	tb.EndBlock(t, b)
	tb.CompletePrompt(t, p)

	last := live[len(live)-1].seq
	rest := readUntil(t, c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openaisdk.Int(last)}), terminal)
	all := append(append([]seen{}, live...), rest...)
	for i, e := range all {
		if e.seq != int64(i) {
			t.Fatalf("event %d is numbered %d (%s): live %d then resumed; want 0, 1, 2 … without a gap or a repeat", i, e.seq, e.typ, len(live))
		}
	}
	end := all[len(all)-1]
	if end.typ != "response.completed" {
		t.Fatalf("the stream ends with %s; want response.completed", end.typ)
	}
	var done responses.ResponseCompletedEvent
	if err := json.Unmarshal([]byte(end.json), &done); err != nil {
		t.Fatal(err)
	}
	got, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, done.Response.RawJSON(), got.RawJSON()) {
		t.Errorf("the stream's final response\n%s\nGET's\n%s", done.Response.RawJSON(), got.RawJSON())
	}
	if got.OutputText() != "Once upon a time …" || got.Status != "completed" || len(got.Output) != 2 || got.Output[0].Type != "reasoning" {
		t.Errorf("response %s; want a reasoning item, then the text", got.RawJSON())
	}
	st := tb.State(t, "alice", uuid.MustParse(got.Conversation.ID))
	if reply := st.Messages[len(st.Messages)-1]; textOf(reply) != "hmmOnce upon a time …" {
		t.Errorf("the conversation's reply %q; want the reasoning and the text the response shows", textOf(reply))
	}

	replay := func(when string) {
		t.Helper()
		again := readUntil(t, c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), terminal)
		if len(again) != len(all) {
			t.Fatalf("%s: the replay has %d events, the live run %d", when, len(again), len(all))
		}
		for i := range all {
			if again[i].seq != all[i].seq || !jsonEqual(t, again[i].json, all[i].json) {
				t.Fatalf("%s: replayed event %d\n%s\nlive\n%s", when, i, again[i].json, all[i].json)
			}
		}
	}
	replay("after the reply ended")
	var removed int
	if err := tb.Pool.QueryRow(ctx, "SELECT convo.compact_prompt($1)", p).Scan(&removed); err != nil {
		t.Fatal(err)
	}
	if removed == 0 {
		t.Fatal("compaction merged no delta: the test proves nothing")
	}
	replay("after compaction")
}

// Cancel stops a background response where it is (its output so far
// stays); its stream ends with
// response.incomplete, status cancelled. A response made without
// background cannot be cancelled, as OpenAI has it.
func TestCancel(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	resp, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("go on")}})
	if err != nil {
		t.Fatal(err)
	}
	p := promptOf(t, resp.ID)
	tb.StartPrompt(t, p)
	b := tb.StartBlock(t, p, "text", "{}")
	tb.AppendText(t, b, "par", "tial")
	got, err := c.Responses.Cancel(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "cancelled" || got.OutputText() != "partial" {
		t.Fatalf("cancelled %s", got.RawJSON())
	}
	events := readUntil(t, c.Responses.GetStreaming(ctx, resp.ID, responses.ResponseGetParams{}), terminal)
	if end := events[len(events)-1]; end.typ != "response.incomplete" {
		t.Fatalf("the stream ends with %s; want response.incomplete", end.typ)
	}
	again, err := c.Responses.Cancel(ctx, resp.ID)
	if err != nil || !jsonEqual(t, again.RawJSON(), got.RawJSON()) {
		t.Fatalf("a second cancel: %v %s; want the response as it stands", err, again.RawJSON())
	}

	sync := tb.Send(t, "alice", uuid.Nil, "not background")
	_, err = c.Responses.Cancel(ctx, "resp_"+sync.PromptID.String())
	apiErr(t, err, http.StatusBadRequest, "")
}

// previous_response_id continues after that reply; naming a reply that
// already has a follow-up branches: the new input is a new version of
// that follow-up.
func TestPreviousResponseContinuesAndBranches(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	answer := func(input, previous string, text string) *responses.Response {
		t.Helper()
		params := responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
			Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(input)}}
		if previous != "" {
			params.PreviousResponseID = openaisdk.String(previous)
		}
		r, err := c.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		p := promptOf(t, r.ID)
		tb.StartPrompt(t, p)
		b := tb.StartBlock(t, p, "text", "{}")
		tb.AppendText(t, b, text)
		tb.EndBlock(t, b)
		tb.CompletePrompt(t, p)
		return r
	}
	r1 := answer("one", "", "1")
	r2 := answer("two", r1.ID, "2")
	if r2.Conversation.ID != r1.Conversation.ID || r2.PreviousResponseID != r1.ID {
		t.Fatalf("r2 %s; want r1's conversation, previous r1", r2.RawJSON())
	}
	r3 := answer("three", r1.ID, "3")
	if r3.Conversation.ID != r1.Conversation.ID {
		t.Fatalf("r3 in conversation %s, want %s", r3.Conversation.ID, r1.Conversation.ID)
	}
	st := tb.State(t, "alice", uuid.MustParse(r1.Conversation.ID))
	var path []string
	for _, m := range st.Messages {
		path = append(path, textOf(m))
	}
	if !reflect.DeepEqual(path, []string{"one", "1", "three", "3"}) {
		t.Fatalf("the active path %q; want one 1 three 3 (three a new version of two)", path)
	}
	if st.Messages[2].SiblingCount != 2 {
		t.Errorf("three has %d versions; want 2 (two and three)", st.Messages[2].SiblingCount)
	}
	// Continuing r2, on the other branch now, switches back to it.
	r4 := answer("four", r2.ID, "4")
	st = tb.State(t, "alice", uuid.MustParse(r4.Conversation.ID))
	path = nil
	for _, m := range st.Messages {
		path = append(path, textOf(m))
	}
	if !reflect.DeepEqual(path, []string{"one", "1", "two", "2", "four", "4"}) {
		t.Fatalf("the active path %q; want one 1 two 2 four 4", path)
	}
}

// A continuation of a reply on another branch that is refused (here past
// the user's cap on prompts in flight) writes nothing: the active path
// stays the branch it was, not the previous response's.
func TestRefusedContinuationLeavesThePath(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	r1, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("one")}})
	if err != nil {
		t.Fatal(err)
	}
	tb.StartPrompt(t, promptOf(t, r1.ID))
	tb.CompletePrompt(t, promptOf(t, r1.ID))
	conv := uuid.MustParse(r1.Conversation.ID)
	first := tb.State(t, "alice", conv).Messages[0].ID
	ed, err := tb.Store.EditMessage(ctx, conversation.EditParams{OwnerID: "alice", ConversationID: conv,
		MessageID: first, Text: "other"})
	if err != nil {
		t.Fatal(err)
	}
	tb.StartPrompt(t, ed.PromptID)
	tb.CompletePrompt(t, ed.PromptID)
	before := tb.State(t, "alice", conv)
	if textOf(before.Messages[0]) != "other" {
		t.Fatalf("the path starts %q; want the edit", textOf(before.Messages[0]))
	}
	// One prompt in flight elsewhere, and a cap of one.
	tb.Send(t, "alice", uuid.Nil, "busy")
	if err := tb.Store.SetMaxActivePrompts(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
		PreviousResponseID: openaisdk.String(r1.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("two")}})
	apiErr(t, err, http.StatusTooManyRequests, "")
	after := tb.State(t, "alice", conv)
	if !reflect.DeepEqual(idsOf(after), idsOf(before)) || after.Seq != before.Seq {
		t.Fatalf("after the refusal the path is %v (seq %d); want it as it was, %v (seq %d)",
			idsOf(after), after.Seq, idsOf(before), before.Seq)
	}
}

// idsOf is the ids of the state's path.
func idsOf(st conversation.State) []uuid.UUID {
	var ids []uuid.UUID
	for _, m := range st.Messages {
		ids = append(ids, m.ID)
	}
	return ids
}

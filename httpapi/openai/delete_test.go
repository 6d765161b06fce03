package openai_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// Delete answers OpenAI's shape; the response is then gone from the
// Responses API (GET, its stream, cancel, a second delete: 404;
// previous_response_id: 400), while the conversation's messages stay.
// Another user cannot delete it; a response still queued is cancelled.
func TestDeleteResponse(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	create := func(input string) *responses.Response {
		t.Helper()
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
			Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(input)}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r1 := create("hello")
	p := promptOf(t, r1.ID)
	tb.StartPrompt(t, p)
	b := tb.StartBlock(t, p, "text", "{}")
	tb.AppendText(t, b, "Hi")
	tb.EndBlock(t, b)
	tb.CompletePrompt(t, p)

	bob := client(t, tb, "bob")
	apiErr(t, bob.Responses.Delete(ctx, r1.ID), http.StatusNotFound, "")
	if _, err := c.Responses.Get(ctx, r1.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("after bob's delete: %v; want alice's response still there", err)
	}

	var body struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}
	if err := c.Responses.Delete(ctx, r1.ID, option.WithResponseBodyInto(&body)); err != nil {
		t.Fatal(err)
	}
	if body.ID != r1.ID || body.Object != "response.deleted" || !body.Deleted {
		t.Fatalf("delete answered %+v; want id, response.deleted, deleted", body)
	}
	_, err := c.Responses.Get(ctx, r1.ID, responses.ResponseGetParams{})
	apiErr(t, err, http.StatusNotFound, "")
	s := c.Responses.GetStreaming(ctx, r1.ID, responses.ResponseGetParams{})
	for s.Next() {
		t.Fatalf("the deleted response streamed %s", s.Current().RawJSON())
	}
	apiErr(t, s.Err(), http.StatusNotFound, "")
	_, err = c.Responses.Cancel(ctx, r1.ID)
	apiErr(t, err, http.StatusNotFound, "")
	apiErr(t, c.Responses.Delete(ctx, r1.ID), http.StatusNotFound, "")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", PreviousResponseID: openaisdk.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("more")}})
	apiErr(t, err, http.StatusBadRequest, "previous_response_id")

	st := tb.State(t, "alice", uuid.MustParse(r1.Conversation.ID))
	if len(st.Messages) != 2 || textOf(st.Messages[0]) != "hello" || textOf(st.Messages[1]) != "Hi" {
		t.Fatalf("the conversation after the delete %+v; want hello and the reply, kept", st.Messages)
	}

	r2 := create("still queued")
	if err := c.Responses.Delete(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	tr, err := tb.Store.Trace(ctx, "alice", uuid.NullUUID{UUID: promptOf(t, r2.ID), Valid: true}, uuid.NullUUID{})
	if err != nil || tr.Prompt.Status != conversation.PromptCancelled {
		t.Fatalf("the queued response's prompt after its delete: %v %v; want cancelled", tr.Prompt.Status, err)
	}
}

package openai_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// client is the OpenAI SDK pointed at the test server as user.
func client(t *testing.T, tb *apitest.Bundle, user string) openaisdk.Client {
	return openaisdk.NewClient(option.WithBaseURL(tb.URL+"/v1/"), option.WithAPIKey(apitest.TokenFor(t, user)),
		option.WithMaxRetries(0))
}

// promptOf is the prompt a response id names.
func promptOf(t *testing.T, id string) uuid.UUID {
	t.Helper()
	p, err := uuid.Parse(id[len("resp_"):])
	if err != nil {
		t.Fatalf("response id %q: %v", id, err)
	}
	return p
}

// apiErr asserts err is the SDK's *openai.Error with status.
func apiErr(t *testing.T, err error, status int, param string) *openaisdk.Error {
	t.Helper()
	var e *openaisdk.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T); want *openai.Error %d", err, err, status)
	}
	if e.StatusCode != status || (param != "" && e.Param != param) {
		t.Fatalf("error %d param %q: %s; want %d naming %q", e.StatusCode, e.Param, e.Message, status, param)
	}
	return e
}

// A background response answers at once, queued; the worker's reply then
// shows in GET: its text, status completed, the request's fields.
func TestCreateBackgroundThenRetrieve(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	resp, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hello")},
		Background: openaisdk.Bool(true), Instructions: openaisdk.String("be brief"),
		Metadata: map[string]string{"k": "v"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "queued" || !resp.Background || resp.Model != "demo" || resp.Metadata["k"] != "v" ||
		resp.Instructions.OfString != "be brief" || len(resp.Output) != 0 {
		t.Fatalf("created %s", resp.RawJSON())
	}
	p := promptOf(t, resp.ID)
	tb.StartPrompt(t, p)
	b := tb.StartBlock(t, p, "text", "{}")
	tb.AppendText(t, b, "Hel", "lo")
	tb.EndBlock(t, b)
	tb.CompletePrompt(t, p)
	got, err := c.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "completed" || got.OutputText() != "Hello" || got.ID != resp.ID || got.Metadata["k"] != "v" {
		t.Fatalf("retrieved %s", got.RawJSON())
	}
	if got.Conversation.ID == "" {
		t.Fatal("no conversation")
	}
	st := tb.State(t, "alice", uuid.MustParse(got.Conversation.ID))
	if len(st.Messages) != 2 || textOf(st.Messages[0]) != "hello" || textOf(st.Messages[1]) != "Hello" {
		t.Fatalf("conversation %+v; want hello and the reply", st.Messages)
	}
}

// Bad input is refused in OpenAI's shape, which the SDK raises as
// *openai.Error with OpenAI's status, and writes nothing.
func TestBadInputIsRefusedAsOpenAIDoes(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	bob := tb.Send(t, "bob", uuid.Nil, "bob's")
	text := responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}
	cases := []struct {
		name   string
		params responses.ResponseNewParams
		status int
		param  string
	}{
		{"unknown model", responses.ResponseNewParams{Model: "gpt-nope", Input: text}, http.StatusBadRequest, "model"},
		{"store false", responses.ResponseNewParams{Model: "demo", Input: text, Store: openaisdk.Bool(false)}, http.StatusBadRequest, "store"},
		{"foreign conversation", responses.ResponseNewParams{Model: "demo", Input: text,
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(bob.ConversationID.String())}},
			http.StatusNotFound, "conversation"},
		{"foreign previous response", responses.ResponseNewParams{Model: "demo", Input: text,
			PreviousResponseID: openaisdk.String("resp_" + bob.PromptID.String())}, http.StatusBadRequest, "previous_response_id"},
		{"input image without a source", responses.ResponseNewParams{Model: "demo", Input: responses.ResponseNewParamsInputUnion{
			OfInputItemList: responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(
				responses.ResponseInputMessageContentListParam{
					responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto),
				}, responses.EasyInputMessageRoleUser)},
		}}, http.StatusBadRequest, "input[0].content[0]"},
		{"empty input", responses.ResponseNewParams{Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(" ")}},
			http.StatusBadRequest, "input"},
	}
	for _, tc := range cases {
		_, err := c.Responses.New(ctx, tc.params)
		apiErr(t, err, tc.status, tc.param)
	}
	list, err := tb.Store.ListConversations(ctx, "alice", 10, nil)
	if err != nil || len(list) != 0 {
		t.Fatalf("alice's conversations %v %v; want none: refusals write nothing", list, err)
	}
	if _, err := c.Responses.Get(ctx, "resp_"+bob.PromptID.String(), responses.ResponseGetParams{}); err != nil {
		apiErr(t, err, http.StatusNotFound, "")
	} else {
		t.Fatal("bob's response was retrieved by alice")
	}
}

// textOf is a message's text: its blocks' content.
func textOf(m conversation.Message) string {
	var s string
	for _, b := range m.Blocks {
		s += b.Content
	}
	return s
}

// Without background or stream, POST /v1/responses answers when the
// reply ends: here the demo worker's, completed, its text blocks' text
// the response's output_text (its tool blocks are not shown yet).
func TestCreateWaitsForTheReply(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true})
	c := client(t, tb, "alice")
	resp, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "completed" || resp.OutputText() == "" {
		t.Fatalf("response %s; want the demo model's reply, completed", resp.RawJSON())
	}
	st := tb.State(t, "alice", uuid.MustParse(resp.Conversation.ID))
	var text string
	for _, b := range st.Messages[len(st.Messages)-1].Blocks {
		if b.Type == "text" {
			text += b.Content
		}
	}
	if got := text; got != resp.OutputText() {
		t.Fatalf("the conversation's reply %q; the response's %q", got, resp.OutputText())
	}
}

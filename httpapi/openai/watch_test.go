package openai_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// One reply of the demo worker, watched at once through the Responses
// stream, StreamConversation and the AI SDK's resume stream, each joined
// while the reply is being written: all three fold to the same text, and
// it is the text GetConversation and GET /v1/responses/{id} hold.
func TestOneReplyWatchedThreeWays(t *testing.T) {
	t.Parallel()
	// Paced so that the reply is still being written when the other two
	// watchers join.
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true, DemoPace: 100, Connect: true})
	ctx, cancel := context.WithTimeout(context.Background(), apitest.WaitTimeout)
	defer cancel()
	c := client(t, tb, "alice")
	s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("tell me about streams")},
		Background: openaisdk.Bool(true),
	})
	defer s.Close()
	var id, conversationID string
	var openaiText strings.Builder
	header := apitest.Bearer(apitest.TokenFor(t, "alice"))
	type folded struct {
		text string
		err  error
	}
	connectDone := make(chan folded, 1)
	var ui *apitest.JSONStream
	for s.Next() {
		e := s.Current()
		switch e.Type {
		case "response.created":
			id, conversationID = e.Response.ID, e.Response.Conversation.ID
		case "response.output_text.delta":
			openaiText.WriteString(e.Delta)
			if ui != nil {
				break
			}
			// The reply is being written: the other two join now.
			go func() {
				text, err := foldStreamConversation(ctx, tb.URL, header, conversationID)
				connectDone <- folded{text, err}
			}()
			ui = apitest.OpenJSONStream(t, http.MethodGet, tb.URL+"/v1/ai-sdk/chat/"+conversationID+"/stream", header, nil, "[DONE]")
			if ui.C.Resp.StatusCode != http.StatusOK {
				t.Fatalf("AI SDK resume: %s", ui.C.Resp.Status)
			}
		}
		if terminal(e) {
			break
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Responses stream: %v", err)
	}
	if ui == nil {
		t.Fatal("the Responses stream ended without a text delta")
	}
	var uiText strings.Builder
	for _, chunk := range ui.Until(t, "[DONE]") {
		if chunk["type"] == "text-delta" {
			uiText.WriteString(chunk["delta"].(string))
		}
	}
	got := <-connectDone
	if got.err != nil {
		t.Fatalf("StreamConversation: %v", got.err)
	}

	resp, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	var stored strings.Builder
	for _, m := range tb.State(t, "alice", uuid.MustParse(conversationID)).Messages {
		if m.Role != conversation.RoleAssistant {
			continue
		}
		for _, b := range m.Blocks {
			if b.Type == "text" {
				stored.WriteString(b.Content)
			}
		}
	}
	want := stored.String()
	if want == "" || resp.Status != "completed" || resp.OutputText() != want {
		t.Fatalf("GET /v1/responses: %s %q; GetConversation's text %q", resp.Status, resp.OutputText(), want)
	}
	for name, text := range map[string]string{
		"Responses stream": openaiText.String(), "StreamConversation": got.text, "AI SDK stream": uiText.String(),
	} {
		if text != want {
			t.Errorf("%s folds to %q, want %q", name, text, want)
		}
	}
}

// foldStreamConversation reads the conversation's StreamConversation until
// its newest prompt completes and returns the text of the assistant
// message's text blocks: those in the snapshot, then the live ones.
func foldStreamConversation(ctx context.Context, base string, header http.Header, conversationID string) (string, error) {
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, base)
	req := connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: conversationID})
	req.Header().Set("Authorization", header.Get("Authorization"))
	st, err := client.StreamConversation(ctx, req)
	if err != nil {
		return "", err
	}
	defer st.Close()
	var order []string
	text := map[string]*strings.Builder{}
	add := func(block, content string) {
		if text[block] == nil {
			text[block] = &strings.Builder{}
			order = append(order, block)
		}
		text[block].WriteString(content)
	}
	for st.Receive() {
		if snap := st.Msg().GetSnapshot(); snap != nil {
			for _, m := range snap.Messages {
				if m.Role != "assistant" {
					continue
				}
				for _, b := range m.Blocks {
					if b.BlockType == "text" {
						add(b.Id, b.Content)
					}
				}
			}
			continue
		}
		ev := st.Msg().GetEvent()
		switch {
		case ev.GetBlockStart() != nil && ev.GetBlockStart().BlockType == "text":
			add(ev.GetBlockStart().BlockId, "")
		case ev.GetBlockDelta() != nil && text[ev.GetBlockDelta().BlockId] != nil:
			add(ev.GetBlockDelta().BlockId, ev.GetBlockDelta().Content)
		case ev.GetPromptCompleted() != nil:
			var out strings.Builder
			for _, b := range order {
				out.WriteString(text[b].String())
			}
			return out.String(), nil
		}
	}
	if err := st.Err(); err != nil {
		return "", err
	}
	return "", connect.NewError(connect.CodeUnknown, nil)
}

package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// The Conversations API through the SDK: a conversation made with
// metadata, written with a response, its metadata replaced, its items
// (the active path's messages' blocks) listed in both orders and paged,
// one read; a system or developer item is refused; another user sees nothing; a delete
// deletes the convo conversation.
func TestConversations(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	conv, err := c.Conversations.New(ctx, conversations.ConversationNewParams{Metadata: shared.Metadata{"topic": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uuid.Parse(conv.ID); err != nil || conv.Object != "conversation" || metadataOf(t, conv.RawJSON())["topic"] != "x" {
		t.Fatalf("created %s", conv.RawJSON())
	}
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(conv.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	p := promptOf(t, r.ID)
	tb.StartPrompt(t, p)
	rs := tb.StartBlock(t, p, "reasoning", "{}")
	tb.AppendText(t, rs, "think")
	tb.EndBlock(t, rs)
	tx := tb.StartBlock(t, p, "text", "{}")
	tb.AppendText(t, tx, "Hi")
	tb.EndBlock(t, tx)
	tb.CompletePrompt(t, p)

	if _, err := c.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"topic": "y"}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Conversations.Get(ctx, conv.ID)
	if err != nil || metadataOf(t, got.RawJSON())["topic"] != "y" || got.ID != conv.ID || got.CreatedAt != conv.CreatedAt {
		t.Fatalf("after the update: %v %s; want topic y", err, got.RawJSON())
	}

	user := "msg_" + tb.State(t, "alice", uuid.MustParse(conv.ID)).Messages[0].ID.String()
	want := []string{user, "rs_" + rs.String(), "msg_" + tx.String()}
	asc, err := c.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	if len(asc.Data) != 3 || asc.HasMore {
		t.Fatalf("items %s; want 3", asc.RawJSON())
	}
	for i, it := range asc.Data {
		if it.ID != want[i] {
			t.Fatalf("item %d is %s; want %s", i, it.ID, want[i])
		}
	}
	if m := asc.Data[0].AsMessage(); m.Role != "user" || len(m.Content) != 1 || m.Content[0].Text != "hello" || m.Content[0].Type != "input_text" {
		t.Fatalf("the user's item %s", asc.Data[0].RawJSON())
	}
	if m := asc.Data[2].AsMessage(); m.Role != "assistant" || len(m.Content) != 1 || m.Content[0].Text != "Hi" || m.Content[0].Type != "output_text" {
		t.Fatalf("the reply's item %s", asc.Data[2].RawJSON())
	}
	if asc.Data[1].Type != "reasoning" {
		t.Fatalf("the reasoning item %s", asc.Data[1].RawJSON())
	}
	// desc (the default), a page of two, then the rest after its last.
	first, err := c.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Limit: openaisdk.Int(2)})
	if err != nil || len(first.Data) != 2 || !first.HasMore || first.Data[0].ID != want[2] || first.LastID != want[1] {
		t.Fatalf("the first page, desc: %v %s", err, first.RawJSON())
	}
	rest, err := c.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{After: openaisdk.String(first.LastID)})
	if err != nil || len(rest.Data) != 1 || rest.HasMore || rest.Data[0].ID != user {
		t.Fatalf("the page after %s: %v %s", first.LastID, err, rest.RawJSON())
	}
	one, err := c.Conversations.Items.Get(ctx, conv.ID, want[2], conversations.ItemGetParams{})
	if err != nil || one.AsMessage().Content[0].Text != "Hi" {
		t.Fatalf("item %s: %v", want[2], err)
	}
	_, err = c.Conversations.Items.Get(ctx, conv.ID, "msg_"+uuid.NewString(), conversations.ItemGetParams{})
	apiErr(t, err, http.StatusNotFound, "")

	_, err = c.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("hi", responses.EasyInputMessageRoleSystem)}})
	apiErr(t, err, http.StatusBadRequest, "items[0].role")
	_, err = c.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("hi", responses.EasyInputMessageRoleDeveloper)}})
	apiErr(t, err, http.StatusBadRequest, "items[0].role")
	bob := client(t, tb, "bob")
	_, err = bob.Conversations.Get(ctx, conv.ID)
	apiErr(t, err, http.StatusNotFound, "")
	_, err = bob.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
	apiErr(t, err, http.StatusNotFound, "")
	_, err = bob.Conversations.Delete(ctx, conv.ID)
	apiErr(t, err, http.StatusNotFound, "")
	list, err := tb.Store.ListConversations(ctx, "alice", 10, nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("alice's conversations %v %v; want the one (refusals write nothing)", list, err)
	}

	del, err := c.Conversations.Delete(ctx, conv.ID)
	if err != nil || !del.Deleted || del.ID != conv.ID || del.Object != "conversation.deleted" {
		t.Fatalf("delete: %v %v", err, del)
	}
	_, err = c.Conversations.Get(ctx, conv.ID)
	apiErr(t, err, http.StatusNotFound, "")
	_, err = c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	apiErr(t, err, http.StatusNotFound, "")
}

// metadataOf is a conversation's metadata (the SDK has it as any).
func metadataOf(t *testing.T, raw string) map[string]string {
	t.Helper()
	var c struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	return c.Metadata
}

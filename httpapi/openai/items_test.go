package openai_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

func userItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

// assistantItem is an assistant message as the SDK sends a response's
// output back: output_text parts.
func assistantItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{
		{OfOutputText: &responses.ResponseOutputTextParam{Text: text, Annotations: []responses.ResponseOutputTextAnnotationUnionParam{}}},
	}, "msg_x", responses.ResponseOutputMessageStatusCompleted)
}

// itemIDs lists the conversation's items, oldest first: their ids and
// texts.
func itemIDs(t *testing.T, c openaisdk.Client, conv string) (ids []string, texts []string) {
	t.Helper()
	list, err := c.Conversations.Items.List(context.Background(), conv, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Data {
		ids = append(ids, it.ID)
		var text strings.Builder
		for _, p := range it.Content.OfMessageContentArray {
			text.WriteString(p.Text)
		}
		texts = append(texts, it.Role+":"+text.String())
	}
	return ids, texts
}

// kinds are the kinds of the conversation's events after seq, in order.
func kinds(t *testing.T, tb *apitest.Bundle, conv string, after int64) []string {
	t.Helper()
	var out []string
	if err := tb.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(kind ORDER BY seq), '{}') FROM convo.events
		WHERE conversation_id = $1 AND seq > $2`, uuid.MustParse(conv), after).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func lastSeqOf(t *testing.T, tb *apitest.Bundle, conv string) int64 {
	t.Helper()
	var seq int64
	if err := tb.Pool.QueryRow(context.Background(), `SELECT last_seq FROM convo.conversations WHERE id = $1`, uuid.MustParse(conv)).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

// Items made with a conversation and items added later are messages
// without a reply, on the active path in order (a user's image among
// them), each announced by messageCreated; a response with conversation
// then answers after them.
func TestConversationItemsAddThenRespond(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Files: true, Workers: true})
	c := client(t, tb, "alice")
	ctx := context.Background()
	conv, err := c.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{userItem("my name is Ada"), assistantItem("Hello Ada.")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, texts := itemIDs(t, c, conv.ID); strings.Join(texts, "|") != "user:my name is Ada|assistant:Hello Ada." {
		t.Fatalf("items %q; want the two messages made with the conversation", texts)
	}
	if k := kinds(t, tb, conv.ID, 0); strings.Join(k, ",") != "messageCreated,messageCreated,conversationUpdated" {
		t.Fatalf("events %v; want a messageCreated per message, then conversationUpdated", k)
	}

	seq := lastSeqOf(t, tb, conv.ID)
	img := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngOf(t, 4, 4))
	added, err := c.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{textPart("and my cat"), imagePart(img, "")},
			responses.EasyInputMessageRoleUser),
		assistantItem("A fine cat."),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(added.Data) != 2 || added.FirstID != added.Data[0].ID || added.LastID != added.Data[1].ID ||
		added.Data[0].Role != "user" || len(added.Data[0].Content.OfMessageContentArray) != 2 ||
		added.Data[0].Content.OfMessageContentArray[1].Type != "input_image" || added.Data[1].Role != "assistant" {
		t.Fatalf("added %s; want the user message with its image, then the assistant's", added.RawJSON())
	}
	if k := kinds(t, tb, conv.ID, seq); strings.Join(k, ",") != "messageCreated,messageCreated,conversationUpdated" {
		t.Fatalf("events of the add %v", k)
	}

	resp, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(conv.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("what is 6*7?")}})
	if err != nil || resp.Status != "completed" {
		t.Fatalf("response %v %v", resp, err)
	}
	_, texts := itemIDs(t, c, conv.ID)
	if len(texts) < 6 || strings.Join(texts[:5], "|") != "user:my name is Ada|assistant:Hello Ada.|user:and my cat|assistant:A fine cat.|user:what is 6*7?" ||
		!strings.HasPrefix(texts[len(texts)-1], "assistant:") {
		t.Fatalf("items %q; want the added messages, then the input and its reply", texts)
	}
	st := tb.State(t, "alice", uuid.MustParse(conv.ID))
	for i, m := range st.Messages[1:] {
		if !m.ParentID.Valid || m.ParentID.UUID != st.Messages[i].ID {
			t.Fatalf("message %d's parent is not the one before it: the path is not one line", i+1)
		}
	}
}

// A refused add writes nothing: no message, no file, no event, no
// conversation.
func TestConversationItemRefusals(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Files: true})
	c := client(t, tb, "alice")
	ctx := context.Background()
	conv, err := c.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := tb.Files.Upload(ctx, "bob", "b.txt", "", strings.NewReader("bob's"))
	if err != nil {
		t.Fatal(err)
	}
	var many []responses.ResponseInputItemUnionParam
	for range 21 {
		many = append(many, userItem("x"))
	}
	foreign := responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
		textPart("look"), imagePart("", bobs.ID.String())}, responses.EasyInputMessageRoleUser)
	for _, tc := range []struct {
		name   string
		items  []responses.ResponseInputItemUnionParam
		status int
		param  string
	}{
		{"a system message", []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("be terse", responses.EasyInputMessageRoleSystem)}, 400, "items[0].role"},
		{"a function call", []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfFunctionCall("{}", "call_1", "f")}, 400, "items[0].type"},
		{"an empty message", []responses.ResponseInputItemUnionParam{userItem("ok"), userItem("  ")}, 400, "items[1].content"},
		{"an assistant's image", []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage(
			responses.ResponseInputMessageContentListParam{imagePart("data:image/png;base64,AAAA", "")}, responses.EasyInputMessageRoleAssistant)}, 400, "items[0].content[0].type"},
		{"21 items", many, 400, "items"},
		{"no items", []responses.ResponseInputItemUnionParam{}, 400, "items"},
		{"another user's file after a good item", []responses.ResponseInputItemUnionParam{userItem("first"), foreign}, 400, "items[1].content[1]"},
	} {
		before := counts(t, tb)
		seq := lastSeqOf(t, tb, conv.ID)
		_, err := c.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: tc.items})
		e := apiErr(t, err, tc.status, tc.param)
		if after := counts(t, tb); after != before || lastSeqOf(t, tb, conv.ID) != seq {
			t.Errorf("%s: refused (%s), but the rows went from %s to %s", tc.name, e.Message, before, after)
		}
		if len(tc.items) > 0 {
			before = counts(t, tb)
			_, err = c.Conversations.New(ctx, conversations.ConversationNewParams{Items: tc.items})
			apiErr(t, err, tc.status, tc.param)
			if after := counts(t, tb); after != before {
				t.Errorf("%s: a new conversation refused, but the rows went from %s to %s", tc.name, before, after)
			}
		}
	}
	bob := client(t, tb, "bob")
	_, err = bob.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("hi")}})
	apiErr(t, err, http.StatusNotFound, "")

	// While a reply is being written: 409, nothing added.
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(conv.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	before := counts(t, tb)
	_, err = c.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("meanwhile")}})
	apiErr(t, err, http.StatusConflict, "")
	if after := counts(t, tb); after != before {
		t.Errorf("an add during a reply was refused, but the rows went from %s to %s", before, after)
	}
	tb.StartPrompt(t, promptOf(t, r.ID))
	_, err = c.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("meanwhile")}})
	apiErr(t, err, http.StatusConflict, "")
}

// Deleting an item deletes its message from the tree and keeps what
// followed it, hung below its parent: the path goes on without it, and a
// branchSwitched event (fork: the parent) tells stream subscribers. An
// assistant item deletes its whole reply, whose response is then gone.
// Items off the path, another user's, and any while a reply is written
// are refused, changing nothing.
func TestDeleteConversationItem(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	conv, err := c.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{
		userItem("u1"), assistantItem("a1"), userItem("u2"), assistantItem("a2")}})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := itemIDs(t, c, conv.ID)
	st := tb.State(t, "alice", uuid.MustParse(conv.ID))
	a1 := st.Messages[1].ID

	seq := lastSeqOf(t, tb, conv.ID)
	got, err := c.Conversations.Items.Delete(ctx, conv.ID, ids[2]) // u2
	if err != nil || got.ID != conv.ID {
		t.Fatalf("delete: %v %v; want the conversation", got, err)
	}
	if _, texts := itemIDs(t, c, conv.ID); strings.Join(texts, "|") != "user:u1|assistant:a1|assistant:a2" {
		t.Fatalf("items after deleting u2: %q", texts)
	}
	var switched struct {
		Fork     string `json:"forkMessageId"`
		Leaf     string `json:"leafMessageId"`
		Messages []struct {
			ID       string `json:"id"`
			ParentID string `json:"parentId"`
		} `json:"messages"`
	}
	readSwitched := func() {
		t.Helper()
		if k := kinds(t, tb, conv.ID, seq); len(k) != 1 || k[0] != "branchSwitched" {
			t.Fatalf("events of the delete %v; want one branchSwitched", k)
		}
		var raw []byte
		if err := tb.Pool.QueryRow(ctx, `SELECT payload FROM convo.events WHERE conversation_id = $1 AND seq > $2`,
			uuid.MustParse(conv.ID), seq).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		switched.Messages = nil
		if err := json.Unmarshal(raw, &switched); err != nil {
			t.Fatal(err)
		}
	}
	readSwitched()
	if switched.Fork != a1.String() || len(switched.Messages) != 1 || switched.Messages[0].ParentID != a1.String() {
		t.Fatalf("branchSwitched %+v; want fork a1 and a2, now below a1", switched)
	}

	// The leaf: the path ends at its parent.
	seq = lastSeqOf(t, tb, conv.ID)
	if _, err := c.Conversations.Items.Delete(ctx, conv.ID, ids[3]); err != nil {
		t.Fatal(err)
	}
	readSwitched()
	if switched.Fork != a1.String() || switched.Leaf != a1.String() || len(switched.Messages) != 0 {
		t.Fatalf("branchSwitched %+v; want a1 the fork and the leaf", switched)
	}

	// Refusals change nothing.
	before, beforeSeq := counts(t, tb), lastSeqOf(t, tb, conv.ID)
	_, err = c.Conversations.Items.Delete(ctx, conv.ID, ids[2]) // gone
	apiErr(t, err, http.StatusNotFound, "")
	_, err = c.Conversations.Items.Delete(ctx, conv.ID, "msg_"+uuid.NewString())
	apiErr(t, err, http.StatusNotFound, "")
	bob := client(t, tb, "bob")
	_, err = bob.Conversations.Items.Delete(ctx, conv.ID, ids[0])
	apiErr(t, err, http.StatusNotFound, "")
	if counts(t, tb) != before || lastSeqOf(t, tb, conv.ID) != beforeSeq {
		t.Fatal("a refused delete wrote")
	}

	// A response answers after a1; while it is written nothing is deleted.
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(conv.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("u3")}})
	if err != nil {
		t.Fatal(err)
	}
	if after := counts(t, tb); after == before {
		t.Fatal("the response wrote nothing")
	}
	before, beforeSeq = counts(t, tb), lastSeqOf(t, tb, conv.ID)
	_, err = c.Conversations.Items.Delete(ctx, conv.ID, ids[0])
	apiErr(t, err, http.StatusConflict, "")
	if counts(t, tb) != before || lastSeqOf(t, tb, conv.ID) != beforeSeq {
		t.Fatal("a refused delete wrote")
	}
	p := promptOf(t, r.ID)
	tb.StartPrompt(t, p)
	b := tb.StartBlock(t, p, "text", "{}")
	tb.AppendText(t, b, "a3")
	tb.EndBlock(t, b)
	tb.CompletePrompt(t, p)
	ids, texts := itemIDs(t, c, conv.ID)
	if strings.Join(texts, "|") != "user:u1|assistant:a1|user:u3|assistant:a3" {
		t.Fatalf("items %q; want the response after a1", texts)
	}
	// Its reply's item deletes the reply: the response is gone.
	if _, err := c.Conversations.Items.Delete(ctx, conv.ID, ids[3]); err != nil {
		t.Fatal(err)
	}
	_, err = c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	apiErr(t, err, http.StatusNotFound, "")
	if _, texts := itemIDs(t, c, conv.ID); strings.Join(texts, "|") != "user:u1|assistant:a1|user:u3" {
		t.Fatalf("items %q after deleting the reply", texts)
	}
}

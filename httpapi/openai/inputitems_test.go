package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// input_items lists the user message the response answers (its input
// items joined, as it was sent), in OpenAI's list shape, also when that
// message is off the active path since; after, limit and order page it,
// and a deleted response's list is 404.
func TestInputItems(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	create := func(previous string, input responses.ResponseNewParamsInputUnion) *responses.Response {
		t.Helper()
		params := responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true), Input: input}
		if previous != "" {
			params.PreviousResponseID = openaisdk.String(previous)
		}
		r, err := c.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		p := promptOf(t, r.ID)
		tb.StartPrompt(t, p)
		tb.CompletePrompt(t, p)
		return r
	}
	r1 := create("", responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("one")})
	r2 := create(r1.ID, responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("a", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfMessage("b", responses.EasyInputMessageRoleUser),
	}})
	conv := uuid.MustParse(r1.Conversation.ID)
	twoID := tb.State(t, "alice", conv).Messages[2].ID
	create(r1.ID, responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("other")}) // r2's input off the path now
	if got := textOf(tb.State(t, "alice", conv).Messages[2]); got != "other" {
		t.Fatalf("the path's third message %q; want the new version", got)
	}

	for _, order := range []responses.InputItemListParamsOrder{"", responses.InputItemListParamsOrderAsc} {
		page, err := c.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{Order: order})
		if err != nil {
			t.Fatal(err)
		}
		want := "msg_" + twoID.String()
		if len(page.Data) != 1 || page.HasMore {
			t.Fatalf("order %q: %s; want one item", order, page.RawJSON())
		}
		it := page.Data[0]
		if it.ID != want || it.Type != "message" || it.Role != "user" || len(it.Content.OfInputItemContentList) != 1 ||
			it.Content.OfInputItemContentList[0].Text != "a\n\nb" || it.Content.OfInputItemContentList[0].Type != "input_text" {
			t.Fatalf("order %q: item %s; want %s, the user message a and b", order, it.RawJSON(), want)
		}
		var shape struct {
			Object  string `json:"object"`
			FirstID string `json:"first_id"`
			LastID  string `json:"last_id"`
		}
		if err := json.Unmarshal([]byte(page.RawJSON()), &shape); err != nil || shape.Object != "list" ||
			shape.FirstID != want || shape.LastID != want {
			t.Fatalf("the list %s (%v); want object list, first_id and last_id %q", page.RawJSON(), err, want)
		}
		after, err := c.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{Order: order,
			After: openaisdk.String(want)})
		if err != nil || len(after.Data) != 0 || after.HasMore {
			t.Fatalf("after the only item: %v %v; want an empty page", err, after)
		}
	}
	_, err := c.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{Limit: openaisdk.Int(0)})
	apiErr(t, err, http.StatusBadRequest, "limit")
	_, err = c.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{Order: "sideways"})
	apiErr(t, err, http.StatusBadRequest, "order")
	bob := client(t, tb, "bob")
	_, err = bob.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{})
	apiErr(t, err, http.StatusNotFound, "")
	if err := c.Responses.Delete(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{})
	apiErr(t, err, http.StatusNotFound, "")
}

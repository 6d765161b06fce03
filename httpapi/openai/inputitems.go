package openai

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/convo-dev/convo/conversation"
)

// Input items list bounds, OpenAI's: limit from 1 to 100, 20 by default.
const (
	defaultItemsLimit = 20
	maxItemsLimit     = 100
)

// inputItem is an input item as OpenAI lists it: a user message.
type inputItem struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Status  string          `json:"status"`
	Content []inputTextPart `json:"content"`
}

type inputTextPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// itemList is OpenAI's list shape.
type itemList struct {
	Object  string      `json:"object"`
	Data    []inputItem `json:"data"`
	FirstID *string     `json:"first_id"`
	LastID  *string     `json:"last_id"`
	HasMore bool        `json:"has_more"`
}

// InputItems serves GET /v1/responses/{id}/input_items: the input the
// response answers, as OpenAI lists it (after, limit, order: desc by
// default). In convo that is one item: the user's message the reply
// answers (input items joined into one message when it was sent, its
// text blocks), id "msg_" and the message's id, whether or not it is on
// the conversation's active path now. An unknown, foreign or deleted
// response is 404; a bad limit, order or after is 400 naming it.
func (h *Handler) InputItems(w http.ResponseWriter, r *http.Request) {
	owner, promptID, ok := h.caller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := defaultItemsLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxItemsLimit {
			h.writeError(w, r, invalid("limit", "invalid_value", "limit must be an integer from 1 to 100."))
			return
		}
		limit = n
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		h.writeError(w, r, invalid("order", "invalid_value", "order must be asc or desc."))
		return
	}
	ctx := r.Context()
	in, err := h.srv.Store.PromptInput(ctx, owner, promptID)
	if conversation.ErrorCode(err) == conversation.NotFound {
		err = notFound(responseID(promptID))
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if deleted, err := h.srv.Store.ResponseDeleted(ctx, promptID); err != nil || deleted {
		if deleted {
			err = notFound(responseID(promptID))
		}
		h.writeError(w, r, err)
		return
	}
	items := []inputItem{{ID: "msg_" + in.MessageID.String(), Type: "message", Role: "user", Status: "completed",
		Content: []inputTextPart{{Type: "input_text", Text: in.Text}}}}
	if order == "desc" {
		slices.Reverse(items) // one item now; the order holds when there are more
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(it inputItem) bool { return it.ID == after })
		if i < 0 {
			h.writeError(w, r, invalid("after", "invalid_value", "after '"+clip(after)+"' is not an input item of this response."))
			return
		}
		items = items[i+1:]
	}
	list := itemList{Object: "list", Data: items}
	if len(items) > limit {
		list.Data, list.HasMore = items[:limit], true
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	writeJSON(w, list)
}

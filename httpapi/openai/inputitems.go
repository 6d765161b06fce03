package openai

import (
	"net/http"

	"github.com/convo-dev/convo/conversation"
)

// Input items list bounds, OpenAI's: limit from 1 to 100, 20 by default.
const (
	defaultItemsLimit = 20
	maxItemsLimit     = 100
)

// InputItems serves GET /v1/responses/{id}/input_items: the input the
// response answers, as OpenAI lists it (after, limit, order: desc by
// default). In convo that is one item: the user's message the reply
// answers (input items joined into one message when it was sent: its
// text blocks, then its files), id "msg_" and the message's id, whether or not it is on
// the conversation's active path now. An unknown, foreign or deleted
// response is 404; a bad limit, order or after is 400 naming it.
func (h *Handler) InputItems(w http.ResponseWriter, r *http.Request) {
	owner, promptID, seg, ok := h.caller(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	if seg > 0 {
		h.continuationInputItems(w, r, owner, promptID, seg)
		return
	}
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
	items := []outputItem{{Type: "message", ID: "msg_" + in.MessageID.String(), Status: "completed", Role: "user",
		Content: userParts(in.Text, in.Files)}}
	list, err := page(items, r.URL.Query())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, list)
}

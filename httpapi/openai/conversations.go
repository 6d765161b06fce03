package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
)

// MaxConversationBytes bounds the body of the Conversations API's writes.
const MaxConversationBytes = 64 << 10

// conversationObject is OpenAI's Conversation: a convo conversation, its
// id the conversation's (a UUID), its metadata the API's own.
type conversationObject struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

// conversationWrite is the body of POST /v1/conversations and of POST
// /v1/conversations/{id}.
type conversationWrite struct {
	Items    []json.RawMessage `json:"items"`
	Metadata map[string]string `json:"metadata"`
}

// conversationRoutes registers the Conversations API.
func (h *Handler) conversationRoutes(route func(string, http.HandlerFunc)) {
	route("POST /v1/conversations", h.srv.JSONBodyOr(MaxCreateBytes, true, h.CreateConversation, h.writeError))
	route("GET /v1/conversations/{id}", h.GetConversation)
	route("POST /v1/conversations/{id}", h.srv.JSONBodyOr(MaxConversationBytes, false, h.UpdateConversation, h.writeError))
	route("DELETE /v1/conversations/{id}", h.DeleteConversation)
	route("GET /v1/conversations/{id}/items", h.ListItems)
	route("GET /v1/conversations/{id}/items/{item}", h.GetItem)
	route("POST /v1/conversations/{id}/items", h.srv.JSONBodyOr(MaxCreateBytes, false, h.AddItems, h.writeError))
	route("DELETE /v1/conversations/{id}/items/{item}", h.DeleteItem)
}

// decodeConversationWrite reads a conversation write of at most limit
// bytes; an empty body is none. items are refused unless the write takes
// them (a new conversation's).
func decodeConversationWrite(w http.ResponseWriter, r *http.Request, limit int64, items bool) (conversationWrite, error) {
	var in conversationWrite
	// JSONBodyOr checked the body (its size, its type) and hands on an
	// empty one only where the route takes none.
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return in, &httpx.BodyTooLarge{Limit: limit}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return in, nil
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, invalid("", "invalid_json", "the body is not a Conversations API request (a JSON object): "+err.Error())
	}
	if len(in.Items) > 0 && !items {
		return in, invalid("items", "unsupported_parameter", "items are added with POST /v1/conversations/{id}/items, not with an update.")
	}
	return in, checkMetadata(in.Metadata)
}

// CreateConversation serves POST /v1/conversations: a new convo
// conversation with the metadata given and items, messages without a
// reply, as AddItems appends them (a refused item refuses the request,
// and the conversation is not kept).
func (h *Handler) CreateConversation(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.user(w, r)
	if !ok {
		return
	}
	in, err := decodeConversationWrite(w, r, MaxCreateBytes, true)
	var items []newItem
	if err == nil && len(in.Items) > 0 {
		items, err = readItems(in.Items)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !h.allowWrite(w, r, owner) {
		return
	}
	ctx := r.Context()
	c, _, err := h.srv.Store.EnsureConversation(ctx, owner, uuid.New())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if len(in.Metadata) > 0 {
		raw, _ := json.Marshal(in.Metadata)
		err = h.srv.Store.SetConversationMetadata(ctx, owner, c.ID, raw)
	}
	if err == nil && len(items) > 0 {
		_, err = h.appendItems(ctx, owner, c.ID, items)
	}
	if err != nil {
		h.srv.DiscardCreated(ctx, owner, c.ID) // a refusal writes nothing
		h.writeError(w, r, conflict(err))
		return
	}
	writeJSON(w, conversationOf(c, in.Metadata))
}

func conversationOf(c conversation.Conversation, metadata map[string]string) conversationObject {
	if metadata == nil {
		metadata = map[string]string{}
	}
	return conversationObject{ID: c.ID.String(), Object: "conversation", CreatedAt: c.CreatedAt.Unix(), Metadata: metadata}
}

// conversation authenticates, reads {id} and the caller's conversation;
// it answers the error itself (404 for an id that is not the caller's
// conversation) and reports false when any step fails.
func (h *Handler) conversation(w http.ResponseWriter, r *http.Request) (string, conversation.Conversation, bool) {
	owner, ok := h.user(w, r)
	if !ok {
		return "", conversation.Conversation{}, false
	}
	raw := r.PathValue("id")
	id, err := uuid.Parse(raw)
	var c conversation.Conversation
	if err == nil && len(raw) == 36 {
		c, err = h.srv.Store.Conversation(r.Context(), owner, id)
	} else {
		err = conversation.Errorf(conversation.NotFound, "not a conversation id")
	}
	if err != nil {
		if conversation.ErrorCode(err) == conversation.NotFound {
			err = &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
				message: "Conversation with id '" + clip(raw) + "' not found."}
		}
		h.writeError(w, r, err)
		return "", conversation.Conversation{}, false
	}
	return owner, c, true
}

// GetConversation serves GET /v1/conversations/{id}.
func (h *Handler) GetConversation(w http.ResponseWriter, r *http.Request) {
	_, c, ok := h.conversation(w, r)
	if !ok {
		return
	}
	raw, err := h.srv.Store.ConversationMetadata(r.Context(), c.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var metadata map[string]string
	_ = json.Unmarshal(raw, &metadata)
	writeJSON(w, conversationOf(c, metadata))
}

// UpdateConversation serves POST /v1/conversations/{id}: it replaces the
// conversation's metadata.
func (h *Handler) UpdateConversation(w http.ResponseWriter, r *http.Request) {
	owner, c, ok := h.conversation(w, r)
	if !ok {
		return
	}
	in, err := decodeConversationWrite(w, r, MaxConversationBytes, false)
	if err == nil && in.Metadata == nil {
		err = invalid("metadata", "missing_required_parameter", "Missing required parameter: 'metadata'.")
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !h.allowWrite(w, r, owner) {
		return
	}
	raw, _ := json.Marshal(in.Metadata)
	if err := h.srv.Store.SetConversationMetadata(r.Context(), owner, c.ID, raw); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, conversationOf(c, in.Metadata))
}

// DeleteConversation serves DELETE /v1/conversations/{id}: it deletes the
// convo conversation and everything in it (its responses too).
func (h *Handler) DeleteConversation(w http.ResponseWriter, r *http.Request) {
	owner, c, ok := h.conversation(w, r)
	if !ok {
		return
	}
	if !h.allowWrite(w, r, owner) {
		return
	}
	if err := h.srv.Store.DeleteConversation(r.Context(), owner, c.ID); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, deletedResponse{ID: c.ID.String(), Object: "conversation.deleted", Deleted: true})
}

// items are the conversation's items: the blocks of the messages of its
// active path, oldest first. A user message is one message item (its
// text, input_text, then its files, input_image or input_file); an
// assistant message's text blocks are message items
// (output_text) and its reasoning blocks reasoning items, with the ids
// the responses show them with; a call of one of convo's own tools that ran
// on the worker an mcp_call item (foldmcp.go). Other blocks are not shown
// yet.
func (h *Handler) items(w http.ResponseWriter, r *http.Request) ([]outputItem, bool) {
	owner, c, ok := h.conversation(w, r)
	if !ok {
		return nil, false
	}
	st, err := h.srv.Store.State(r.Context(), owner, c.ID)
	if err != nil {
		h.writeError(w, r, err)
		return nil, false
	}
	inputs, err := h.callInputs(r.Context(), st)
	if err != nil {
		h.writeError(w, r, err)
		return nil, false
	}
	var items []outputItem
	for _, m := range st.Messages {
		items = append(items, messageItems(m, inputs)...)
	}
	return items, true
}

// messageItems are the items of one message of the path: a user
// message is one message item (its text, input_text, then its files); an
// assistant message's text blocks are message items (output_text) and its
// reasoning blocks reasoning items. Other blocks are not shown yet.
func messageItems(m conversation.Message, inputs map[uuid.UUID]conversation.InputRequest) []outputItem {
	if m.Role == conversation.RoleUser {
		var text strings.Builder
		var files []conversation.MessageFile
		for _, b := range m.Blocks {
			if b.Type == "text" {
				text.WriteString(b.Content)
			} else if f, ok := messageFile(b); ok {
				files = append(files, f)
			}
		}
		return []outputItem{{Type: "message", ID: "msg_" + m.ID.String(), Status: "completed", Role: "user",
			Content: userParts(text.String(), files)}}
	}
	var items []outputItem
	for _, b := range m.Blocks {
		status := "completed"
		if b.Status == conversation.BlockStreaming {
			status = "in_progress"
		}
		switch b.Type {
		case "text":
			items = append(items, outputItem{Type: "message", ID: "msg_" + b.ID.String(), Status: status, Role: "assistant",
				Content: []contentPart{{Type: "output_text", Text: b.Content, Annotations: &[]json.RawMessage{}, Logprobs: &[]json.RawMessage{}}}})
		case "reasoning":
			items = append(items, outputItem{Type: "reasoning", ID: "rs_" + b.ID.String(), Status: status, Summary: &[]string{},
				Content: []contentPart{{Type: "reasoning_text", Text: b.Content}}})
		case "tool_use":
			if it, ok := mcpCallOf(b, inputs); ok {
				items = append(items, it)
			}
		}
	}
	return items
}

// ListItems serves GET /v1/conversations/{id}/items: the conversation's
// items (after, limit, order: desc by default), OpenAI's list shape.
func (h *Handler) ListItems(w http.ResponseWriter, r *http.Request) {
	items, ok := h.items(w, r)
	if !ok {
		return
	}
	list, err := page(items, r.URL.Query())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, list)
}

// GetItem serves GET /v1/conversations/{id}/items/{item}: one item of
// the active path; 404 for another.
func (h *Handler) GetItem(w http.ResponseWriter, r *http.Request) {
	items, ok := h.items(w, r)
	if !ok {
		return
	}
	id := r.PathValue("item")
	i := slices.IndexFunc(items, func(it outputItem) bool { return it.ID == id })
	if i < 0 {
		h.writeError(w, r, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
			message: "Item with id '" + clip(id) + "' not found."})
		return
	}
	writeJSON(w, items[i])
}

// itemList is OpenAI's list shape.
type itemList struct {
	Object  string       `json:"object"`
	Data    []outputItem `json:"data"`
	FirstID *string      `json:"first_id"`
	LastID  *string      `json:"last_id"`
	HasMore bool         `json:"has_more"`
}

// page is one page of items (oldest first) as the query asks: order
// (desc by default), after (an item id), limit (1 to 100, 20 by
// default). A bad parameter is a 400 naming it.
func page(items []outputItem, q url.Values) (itemList, error) {
	limit := defaultItemsLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxItemsLimit {
			return itemList{}, invalid("limit", "invalid_value", "limit must be an integer from 1 to 100.")
		}
		limit = n
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		return itemList{}, invalid("order", "invalid_value", "order must be asc or desc.")
	}
	items = slices.Clone(items)
	if order == "desc" {
		slices.Reverse(items)
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(it outputItem) bool { return it.ID == after })
		if i < 0 {
			return itemList{}, invalid("after", "invalid_value", "after '"+clip(after)+"' is not an item of this list.")
		}
		items = items[i+1:]
	}
	list := itemList{Object: "list", Data: items}
	if list.Data == nil {
		list.Data = []outputItem{}
	}
	if len(items) > limit {
		list.Data, list.HasMore = items[:limit], true
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	return list, nil
}

package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/wire"
)

// maxNewItems bounds the items of one add, OpenAI's: 20.
const maxNewItems = 20

// messageContent reads a message's content: a string, or parts. A user's
// parts are input_text, input_image and input_file (the last two its
// files, inputFile); an assistant's are output_text or input_text. The
// texts of the parts are joined. Errors are 400s naming the part.
func messageContent(field string, role conversation.Role, content json.RawMessage) (string, []httpx.Attachment, error) {
	c := bytes.TrimSpace(content)
	if len(c) > 0 && c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return "", nil, invalid(field+".content", "invalid_value", err.Error())
		}
		return s, nil, nil
	}
	want := "input_text, input_image and input_file"
	if role == conversation.RoleAssistant {
		want = "output_text"
	}
	var parts []inputPart
	if err := json.Unmarshal(c, &parts); err != nil || len(parts) == 0 {
		return "", nil, invalid(field+".content", "invalid_value", fmt.Sprintf("%s.content must be a string or an array of %s parts.", field, want))
	}
	var b strings.Builder
	var atts []httpx.Attachment
	for j, p := range parts {
		pf := fmt.Sprintf("%s.content[%d]", field, j)
		switch {
		case p.Type == "input_text" || (p.Type == "output_text" && role == conversation.RoleAssistant):
			if p.Text == nil {
				return "", nil, invalid(pf+".text", "missing_required_parameter", "Missing required parameter: '"+pf+".text'.")
			}
			b.WriteString(*p.Text)
		case (p.Type == "input_image" || p.Type == "input_file") && role == conversation.RoleUser:
			a, err := inputFile(pf, p)
			if err != nil {
				return "", nil, err
			}
			atts = append(atts, a)
		default:
			return "", nil, invalid(pf+".type", "unsupported_value", fmt.Sprintf("%s has type %q; a %s message takes %s parts.", pf, clip(p.Type), role, want))
		}
	}
	return b.String(), atts, nil
}

// newItem is one message of an add of items: its role, text and files.
type newItem struct {
	role conversation.Role
	text string
	atts []httpx.Attachment
}

// readItems reads the items of an add: 1 to 20 messages (type message
// or none), each the user's (text and files, as input's) or the
// assistant's (text: a string, or output_text parts), the text checked as
// every message's. Other roles and item types are 400s naming the item.
func readItems(raw []json.RawMessage) ([]newItem, error) {
	if len(raw) == 0 {
		return nil, invalid("items", "empty_array", "items has no item: add 1 to 20 messages.")
	}
	if len(raw) > maxNewItems {
		return nil, invalid("items", "invalid_value", fmt.Sprintf("items has %d items; at most %d at a time.", len(raw), maxNewItems))
	}
	out := make([]newItem, len(raw))
	for i, r := range raw {
		field := fmt.Sprintf("items[%d]", i)
		var it struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(r, &it); err != nil {
			return nil, invalid(field, "invalid_value", field+" must be a message item: "+err.Error())
		}
		if it.Type != "" && it.Type != "message" {
			return nil, invalid(field+".type", "unsupported_value", fmt.Sprintf("%s is a %q item; convo adds user and assistant messages only.", field, clip(it.Type)))
		}
		role := conversation.Role(it.Role)
		if role != conversation.RoleUser && role != conversation.RoleAssistant {
			return nil, invalid(field+".role", "unsupported_value", fmt.Sprintf("%s has role %q; convo adds user and assistant messages only (instructions go with a response).", field, clip(it.Role)))
		}
		text, atts, err := messageContent(field, role, it.Content)
		if err != nil {
			return nil, err
		}
		if len(atts) > 0 {
			err = wire.CheckText(field+".content", text, false, wire.MaxMessageText)
		} else {
			err = wire.CheckMessageText(field+".content", text)
		}
		if err != nil {
			return nil, invalid(field+".content", "invalid_value", err.Error())
		}
		out[i] = newItem{role: role, text: text, atts: atts}
	}
	return out, nil
}

// appendItems stores the items' files and appends their messages to
// conv at its active leaf, without a reply (convo.append_messages: one
// transaction; a refusal writes no message). It returns the items the
// messages show as, in order.
func (h *Handler) appendItems(ctx context.Context, owner string, conv uuid.UUID, items []newItem) ([]outputItem, error) {
	msgs := make([]conversation.AppendedMessage, len(items))
	for i, it := range items {
		ids, err := h.storeFiles(ctx, owner, it.atts)
		if err != nil {
			var api *apiError
			if errors.As(err, &api) && api.param == "input" {
				api.param, api.message = fmt.Sprintf("items[%d].content", i), strings.Replace(api.message, "input", fmt.Sprintf("items[%d]", i), 1)
			}
			return nil, err
		}
		msgs[i] = conversation.AppendedMessage{Role: it.role, Text: it.text, FileIDs: ids}
	}
	ids, err := h.srv.Store.AppendMessages(ctx, conversation.AppendMessagesParams{OwnerID: owner, ConversationID: conv, Messages: msgs})
	if err != nil {
		return nil, itemFileRefusal(err, items)
	}
	st, err := h.srv.Store.State(ctx, owner, conv)
	if err != nil {
		return nil, err
	}
	var out []outputItem
	for _, m := range st.Messages {
		if slices.Contains(ids, m.ID) {
			out = append(out, messageItems(m, nil)...)
		}
	}
	return out, nil
}

// itemFile reads the item and file the store's refusal of a file names
// (items[i]: file_ids[j]).
var itemFile = regexp.MustCompile(`items\[(\d+)\]: file_ids\[(\d+)\]`)

// itemFileRefusal is fileRefusal for an add of items: a file the store
// refuses is a 400 naming the part of the item that named it.
func itemFileRefusal(err error, items []newItem) error {
	var ce *conversation.Error
	if !errors.As(err, &ce) {
		return err
	}
	m := itemFile.FindStringSubmatch(ce.Message)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[1])
	j, _ := strconv.Atoi(m[2])
	if i >= len(items) || j >= len(items[i].atts) {
		return err
	}
	field := items[i].atts[j].Field
	msg := ce.Message
	if _, rest, ok := strings.Cut(msg, m[0]+": "); ok {
		msg = rest
	}
	return invalid(field, "invalid_value", field+": "+msg)
}

// addItemsBody is the body of POST /v1/conversations/{id}/items.
type addItemsBody struct {
	Items []json.RawMessage `json:"items"`
}

// AddItems serves POST /v1/conversations/{id}/items: the items (user and
// assistant messages) are appended to the conversation's active path
// without a reply, so that a later response with conversation answers
// after them. It answers the items added in OpenAI's list shape. A
// refused item refuses all, writing no message.
func (h *Handler) AddItems(w http.ResponseWriter, r *http.Request) {
	owner, c, ok := h.conversation(w, r)
	if !ok {
		return
	}
	var body addItemsBody
	if err := httpx.DecodeJSON(w, r, MaxCreateBytes, &body, "a Conversations API request (a JSON object with items)"); err != nil {
		if _, ok := err.(*httpx.BodyTooLarge); !ok {
			err = invalid("", "invalid_json", err.Error())
		}
		h.writeError(w, r, err)
		return
	}
	items, err := readItems(body.Items)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !h.allowWrite(w, r, owner) {
		return
	}
	added, err := h.appendItems(r.Context(), owner, c.ID, items)
	if err != nil {
		h.writeError(w, r, conflict(err))
		return
	}
	writeJSON(w, listOf(added))
}

// listOf is items as one list, all of it.
func listOf(items []outputItem) itemList {
	list := itemList{Object: "list", Data: items}
	if list.Data == nil {
		list.Data = []outputItem{}
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	return list
}

// DeleteItem serves DELETE /v1/conversations/{id}/items/{item}: it
// deletes the message the item shows (an assistant item: the whole reply
// it is part of, every item of it) from the conversation's tree, the
// messages after it kept (convo.delete_message; docs/branches.md), and
// answers the conversation. An item that is not on the active path is
// 404; a conversation whose reply is being written refuses (409).
func (h *Handler) DeleteItem(w http.ResponseWriter, r *http.Request) {
	owner, c, ok := h.conversation(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	st, err := h.srv.Store.State(ctx, owner, c.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	id := r.PathValue("item")
	message := uuid.Nil
	for _, m := range st.Messages {
		if slices.ContainsFunc(messageItems(m, nil), func(it outputItem) bool { return it.ID == id }) {
			message = m.ID
		}
	}
	if message == uuid.Nil {
		h.writeError(w, r, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
			message: "Item with id '" + clip(id) + "' not found."})
		return
	}
	if !h.allowWrite(w, r, owner) {
		return
	}
	if err := h.srv.Store.DeleteMessage(ctx, owner, c.ID, message); err != nil {
		h.writeError(w, r, conflict(err))
		return
	}
	raw, err := h.srv.Store.ConversationMetadata(ctx, c.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var metadata map[string]string
	_ = json.Unmarshal(raw, &metadata)
	writeJSON(w, conversationOf(c, metadata))
}

// conflict is err, or, for the store's FailedPrecondition (a reply of the
// conversation is being written; a message off the path or of a
// comparison), a 409 saying why.
func conflict(err error) error {
	var ce *conversation.Error
	if errors.As(err, &ce) && ce.Code == conversation.FailedPrecondition {
		return &apiError{status: http.StatusConflict, typ: "invalid_request_error", code: "conflict", message: ce.Message}
	}
	return err
}

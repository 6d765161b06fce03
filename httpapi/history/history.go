package history

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/wire"
	"github.com/convo-dev/convo/wire/view"
)

// contentType says which vocabulary a history entry's events use:
// the Connect API's events (proto3 JSON of convo.v1.Event), coalesced.
const contentType = "application/vnd.convo.events+json; coalesced=true"

// pageSize is how many events one read of the log takes.
const pageSize = 10_000

// document is the body of GET /v1/conversations/{id}/history.
type document struct {
	ConversationID string `json:"conversationId"`
	Title          string `json:"title,omitempty"`
	// Seq is the last event the export reflects (a string, as 64-bit
	// integers are in the Connect API's JSON).
	Seq         string  `json:"seq"`
	ContentType string  `json:"contentType"`
	Content     []entry `json:"content"`
	// OlderPageToken, when set, says that older messages were left out:
	// ?page_token= with it exports them, a page at a time.
	OlderPageToken string `json:"olderPageToken,omitempty"`
}

// entry is one message.
type entry struct {
	ID     string `json:"id"`
	Role   string `json:"role"`
	Status string `json:"status"`
	// Text is the message's text blocks concatenated, for search and
	// simple clients.
	Text string `json:"text"`
	// Files are the files a user message holds (convo.v1.File in proto3
	// JSON, with signed URLs), in order.
	Files []json.RawMessage `json:"files,omitempty"`
	// Events are the reply's events, coalesced; only for a message with
	// more than text (reasoning, tool calls, structured output, …).
	Events []json.RawMessage `json:"events,omitempty"`
}

// Handler serves the history export of a conversation.
type Handler struct{ srv *httpx.Server }

// New returns the handler of GET /v1/conversations/{id}/history.
func New(srv *httpx.Server) *Handler { return &Handler{srv: srv} }

// ServeHTTP serves GET /v1/conversations/{id}/history: the conversation as
// history entries, one per message, as it stands at one seq: its latest
// messages that fit the snapshot size (httpx.Server.PageBytes), or with
// ?page_token= the page of messages before the token; olderPageToken
// names the messages before those.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	owner, id, err := h.srv.Caller(r)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	// Held until the document is written: a client that does not read
	// holds its place (httpx.Server.Reads).
	release, err := h.srv.Reads.Acquire(owner)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer release()
	ctx := r.Context()
	read, err := h.srv.ReadMessages(r, owner, id)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	st := read.State
	messages, err := wire.Messages(st.Messages)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	wire.SignFiles(h.srv.URLs, messages...)
	conv := view.New(&convov1.Snapshot{Messages: messages})
	// The prompts whose events the export carries.
	wanted := map[string]bool{}
	for _, m := range conv.Messages {
		if m.PromptID != "" && !textOnly(m) {
			wanted[m.PromptID] = true
		}
	}
	events := map[string][]*convov1.Event{}
	for after := int64(0); len(wanted) > 0 && after < st.Seq; {
		page, err := h.srv.Store.EventsAfter(ctx, id, after, pageSize)
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
		for _, e := range page {
			if e.Seq > st.Seq {
				break
			}
			after = e.Seq
			if !e.PromptID.Valid || !wanted[e.PromptID.UUID.String()] || !replyEvent(e.Kind) {
				continue
			}
			decoded, err := wire.DecodeEvent(e)
			if err != nil {
				h.srv.WriteError(w, r, err)
				return
			}
			prompt := e.PromptID.UUID.String()
			events[prompt] = append(events[prompt], decoded.GetEvent())
		}
		if len(page) < pageSize {
			break
		}
	}

	doc := document{ConversationID: id.String(), Title: st.Conversation.Title, Seq: strconv.FormatInt(st.Seq, 10),
		ContentType: contentType, Content: []entry{}, OlderPageToken: read.OlderPageToken}
	for _, m := range conv.Messages {
		e := entry{ID: m.ID, Role: m.Role, Status: m.Status, Text: joinedText(m), Files: filesOf(m)}
		if wanted[m.PromptID] {
			e.Events = []json.RawMessage{}
			for _, ev := range coalesce(events[m.PromptID]) {
				b, err := httpx.ProtoJSON.Marshal(ev)
				if err != nil {
					h.srv.WriteError(w, r, err)
					return
				}
				e.Events = append(e.Events, b)
			}
		}
		doc.Content = append(doc.Content, e)
	}
	header := w.Header()
	header.Set("Content-Type", "application/json")
	header.Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(doc)
}

// filesOf is the files message m holds, in proto3 JSON.
func filesOf(m *view.Message) []json.RawMessage {
	var out []json.RawMessage
	for _, b := range m.Blocks {
		if b.Kind == view.File && b.File != nil {
			if j, err := httpx.ProtoJSON.Marshal(b.File); err == nil {
				out = append(out, j)
			}
		}
	}
	return out
}

// textOnly reports whether a message has nothing but text blocks (and
// files, which its entry lists), so that its text says everything.
func textOnly(m *view.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind != view.Text && b.Kind != view.File {
			return false
		}
	}
	return true
}

// joinedText is a message's text blocks concatenated.
func joinedText(m *view.Message) string {
	var text strings.Builder
	for _, b := range m.Blocks {
		if b.Kind == view.Text {
			text.WriteString(b.Content())
		}
	}
	return text.String()
}

// replyEvent reports whether an event of a prompt is part of its reply:
// the prompt's and its blocks' and tool calls' events, not those about
// the message itself (which the entry is).
func replyEvent(kind conversation.EventKind) bool {
	switch kind {
	case conversation.EventMessageCreated, conversation.EventMessageUpdated,
		conversation.EventConversationUpdated, conversation.EventHistoryCleared:
		return false
	}
	return true
}

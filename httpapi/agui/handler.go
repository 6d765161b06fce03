package agui

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// MaxRunInputBytes bounds a RunAgentInput (it carries the client's copy of
// the whole thread).
const MaxRunInputBytes = 4 << 20

// Handler serves AG-UI: a conversation is a thread, each prompt a run.
type Handler struct{ srv *httpx.Server }

// New returns the handler of POST /v1/agui and GET
// /v1/conversations/{id}/agui.
func New(srv *httpx.Server) *Handler { return &Handler{srv: srv} }

// Follow serves GET /v1/conversations/{id}/agui: the conversation as
// AG-UI runs, one per prompt, for as long as the client stays. A prompt
// active when the stream starts is a run at once; an idle conversation's
// stream waits (with keep-alive comments) for the next prompt.
func (h *Handler) Follow(w http.ResponseWriter, r *http.Request) {
	owner, id, err := h.srv.Caller(r)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	sub, snap, replay, err := h.open(r.Context(), owner, id)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer sub.Close()
	h.stream(w, r, sub, newTranslator(id.String(), snap, "", ""), replay)
}

// Run serves POST /v1/agui: AG-UI's RunAgentInput in, the run it asks
// for out. The thread id is the conversation id (a conversation with it is
// created when none exists; none at all starts a new conversation); the
// last user message in messages becomes the user's message; forwardedProps
// may carry the model configuration as {"model": {...}} (convo.v1
// ModelConfig, as SendMessage's model). A last user message that is one
// of the thread's, with another text, is an edit of it (EditMessage); with
// the same text, a rerun, refused. The prompt is queued, and the
// response streams that prompt's run until it ends. The prompt does not
// depend on the request: a client that goes away can follow the
// conversation (GET /v1/conversations/{id}/agui) to see the rest.
func (h *Handler) Run(w http.ResponseWriter, r *http.Request) {
	owner, in, ok := httpx.WriteRequest(h.srv, w, r, decodeRunInput)
	if !ok {
		return
	}
	if in.answers != nil {
		h.answer(w, r, owner, in)
		return
	}
	ctx := r.Context()
	id, created := in.threadID, false
	if id == uuid.Nil {
		c, err := h.srv.Store.CreateConversation(ctx, owner, "")
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
		id, created = c.ID, true
	} else {
		var err error
		if _, created, err = h.srv.Store.EnsureConversation(ctx, owner, id); err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
	}
	// The conversation must exist to be subscribed to, before the message
	// is sent: a refusal in between (the stream limit, the cap on prompts
	// in flight) deletes the one this request created.
	sent := false
	if created {
		defer func() {
			if !sent {
				h.srv.DiscardCreated(ctx, owner, id)
			}
		}()
	}

	// Subscribe before the message is sent, so that no event of its run
	// can be missed.
	sub, snap, replay, err := h.open(ctx, owner, id)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer sub.Close()
	held, err := h.heldMessage(ctx, owner, id, snap, in.userMessageID)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	if len(in.attachments) > h.srv.MaxAttachments() {
		h.srv.WriteError(w, r, wire.Invalid("messages", "the last user message holds %d files; a message holds at most %d (the server's files per message)",
			len(in.attachments), h.srv.MaxAttachments()))
		return
	}
	var promptID string
	if held != nil && heldText(held) == in.text && sameFiles(held, in.attachments) {
		// The last user message is one of the thread's, as it is: a
		// rerun (refused).
		h.srv.WriteError(w, r, conversation.Errorf(conversation.FailedPrecondition,
			"messages: the last user message (%s) is already in the conversation with this text; append a new user message to run again, or change its text to edit it",
			in.userMessageID))
		return
	}
	// The inline files are stored before the message that holds them.
	fileIDs, err := h.srv.StoreAttachments(ctx, owner, in.attachments)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	if held != nil {
		// The last user message is one of the thread's, changed: an edit
		// of it (a new version of its turn, docs/branches.md).
		ed, err := h.srv.Store.EditMessage(ctx, conversation.EditParams{
			OwnerID: owner, ConversationID: id, MessageID: uuid.MustParse(held.Id), Text: in.text, ModelConfig: in.modelConfig,
			FileIDs: fileIDs,
		})
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
		promptID = ed.PromptID.String()
	} else {
		model := in.modelConfig
		if model == nil {
			model = json.RawMessage("{}")
		}
		res, err := h.srv.Store.SendMessage(ctx, conversation.SendMessageParams{
			OwnerID: owner, ConversationID: id, Text: in.text, ModelConfigs: []json.RawMessage{model},
			FileIDs: fileIDs,
		})
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
		promptID = res.PromptIDs[0].String()
	}
	sent = true
	runID := in.RunID
	if runID == "" {
		runID = promptID
	}
	h.stream(w, r, sub, newTranslator(id.String(), snap, promptID, runID), replay)
}

// heldMessage is the user message of the thread's active path with the
// id, nil when there is none: a message on another branch is not found,
// and its id names a new message. The snapshot answers unless it left
// older messages out; the path is read then.
func (h *Handler) heldMessage(ctx context.Context, owner string, conversationID uuid.UUID, snap *convov1.Snapshot, id string) (*convov1.Message, error) {
	if id == "" {
		return nil, nil
	}
	for _, m := range snap.GetMessages() {
		if m.GetId() == id && m.GetRole() == string(conversation.RoleUser) {
			return m, nil
		}
	}
	// A bounded snapshot (CONVO_SNAPSHOT_BYTES) leaves older messages
	// out: one of those is still the thread's, and an edit of it is an
	// edit, not a new message. Only an id of convo's can name one.
	if snap.GetOlderPageToken() == "" {
		return nil, nil
	}
	messageID, err := uuid.Parse(id)
	if err != nil {
		return nil, nil
	}
	st, err := h.srv.Store.State(ctx, owner, conversationID)
	if err != nil {
		return nil, err
	}
	for _, m := range st.Messages {
		if m.ID == messageID && m.Role == conversation.RoleUser {
			return wire.Message(m)
		}
	}
	return nil, nil
}

// sameFiles reports whether the attachments are, in order, the files
// held holds: each named by id (inline bytes are a new file).
func sameFiles(held *convov1.Message, atts []httpx.Attachment) bool {
	var ids []string
	for _, b := range held.GetBlocks() {
		if f := b.GetFile(); f != nil {
			ids = append(ids, f.GetId())
		}
	}
	if len(ids) != len(atts) {
		return false
	}
	for i, a := range atts {
		if a.Data != nil || a.ID.String() != ids[i] {
			return false
		}
	}
	return true
}

// heldText is a user message's text: its text blocks.
func heldText(m *convov1.Message) string {
	var text strings.Builder
	for _, b := range m.GetBlocks() {
		if b.GetBlockType() == "text" {
			text.WriteString(b.GetContent())
		}
	}
	return text.String()
}

// open opens a subscription of the conversation for an AG-UI stream
// and returns how it starts: its snapshot, then the replayed events of the
// blocks still streaming in it. The stream follows changes of the active
// path (branchSwitched): the translator shows each as a snapshot of the
// new path.
func (h *Handler) open(ctx context.Context, owner string, id uuid.UUID) (*wire.Subscription, *convov1.Snapshot, []*convov1.Event, error) {
	sub, first, err := wire.Open(ctx, h.srv.Hub, stream.OpenParams{OwnerID: owner, ConversationID: id, Branches: true}, h.srv.URLs)
	if err != nil {
		return nil, nil, nil, err
	}
	var replay []*convov1.Event
	for _, m := range first[1:] {
		replay = append(replay, m.GetEvent())
	}
	return sub, first[0].GetSnapshot(), replay, nil
}

// stream answers with the translator's AG-UI events as SSE (each event
// one "data:" line of JSON, as AG-UI's HTTP binding has it), starting with
// the replay of the snapshot's streaming blocks, until the stream is done
// or cut off.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, sub *wire.Subscription, tr *translator, replay []*convov1.Event) {
	ctx := r.Context()
	out, err := h.srv.StartSSE(w)
	if err != nil {
		return
	}
	defer out.End()
	events := tr.begin()
	for _, ev := range replay {
		events = append(events, tr.apply(ev)...)
	}
	if err := out.JSONEvents(events); err != nil {
		return
	}
	for !tr.done {
		item, err := h.srv.Next(ctx, r, sub, out)
		if err != nil {
			if ctx.Err() == nil {
				_ = out.JSONEvents(tr.interrupt(interruption(err)))
			}
			h.srv.StreamEnded(r, err, sub.Cursor())
			return
		}
		if err := out.JSONEvents(tr.apply(item.Payload.GetEvent())); err != nil {
			return
		}
	}
}

// interruption is the RUN_ERROR code and message for a stream that ended
// with err before its run did.
func interruption(err error) (code, message string) {
	switch {
	case errors.Is(err, stream.ErrDeleted):
		return codeDeleted, "the conversation was deleted"
	case errors.Is(err, stream.ErrClosed):
		return codeInterrupted, "the server is shutting down; the reply goes on: follow the conversation again to see the rest"
	case errors.Is(err, stream.ErrFellBehind):
		return codeInterrupted, "the client read too slowly and was cut off; the reply goes on: follow the conversation again to see the rest"
	case errors.Is(err, stream.ErrEventsCompacted):
		return codeInterrupted, "the events after this point were compacted; follow the conversation again for a fresh snapshot"
	}
	return codeInterrupted, "the stream failed; the reply goes on: follow the conversation again to see the rest"
}

// runInput is what convo reads of AG-UI's RunAgentInput; tools, context
// and state are accepted and ignored (convo's tools run on its workers).
// Tool messages after the last user message, and resume entries, answer
// the thread's input requests (see answer).
type runInput struct {
	ThreadID       string          `json:"threadId"`
	RunID          string          `json:"runId"`
	Messages       []inputMessage  `json:"messages"`
	ForwardedProps json.RawMessage `json:"forwardedProps"`
	Resume         []resumeEntry   `json:"resume"`

	// answers are the answers the input carries (none: a new message).
	answers []runAnswer

	threadID      uuid.UUID
	text          string
	attachments   []httpx.Attachment // the user message's media parts
	userMessageID string
	modelConfig   json.RawMessage
}

type inputMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	Error      *string         `json:"error"`
}

type inputPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// A media part's (image, audio, video, document).
	Source   *partSource     `json:"source"`
	Metadata json.RawMessage `json:"metadata"`
}

// decodeRunInput reads and checks a RunAgentInput. Errors are Invalid,
// naming the field.
func decodeRunInput(w http.ResponseWriter, r *http.Request) (*runInput, error) {
	var in runInput
	if err := httpx.DecodeJSON(w, r, MaxRunInputBytes, &in, "a RunAgentInput JSON object"); err != nil {
		return nil, err
	}
	if in.ThreadID != "" {
		id, err := wire.RequireID("threadId", in.ThreadID)
		if err != nil {
			return nil, err
		}
		in.threadID = id
	}
	if len(in.RunID) > 200 {
		return nil, wire.Invalid("runId", "is %d bytes long; the limit is 200", len(in.RunID))
	}
	answers, err := runAnswers(&in)
	if err != nil {
		return nil, err
	}
	if len(answers) > 0 {
		if in.threadID == uuid.Nil {
			return nil, wire.Invalid("threadId", "is required to answer a thread's input requests")
		}
		in.answers = answers
		return &in, nil
	}
	i, text, atts, err := lastUserMessage(in.Messages)
	if err != nil {
		return nil, err
	}
	in.text, in.attachments, in.userMessageID = text, atts, in.Messages[i].ID
	if in.modelConfig, err = modelConfig(in.ForwardedProps); err != nil {
		return nil, err
	}
	return &in, nil
}

// lastUserMessage finds the last user message of messages and returns its
// index, its text and its media parts as attachments. Text is required
// unless it holds files.
func lastUserMessage(messages []inputMessage) (int, string, []httpx.Attachment, error) {
	for i := len(messages) - 1; i >= 0; i-- {
		m := messages[i]
		if m.Role != "user" {
			continue
		}
		field := fmt.Sprintf("messages[%d].content", i)
		text, atts, err := userContent(field, m.Content)
		if err != nil {
			return i, "", nil, err
		}
		if len(atts) > 0 {
			return i, text, atts, wire.CheckText(field, text, false, wire.MaxMessageText)
		}
		return i, text, nil, wire.CheckMessageText(field, text)
	}
	return -1, "", nil, wire.Invalid("messages", "has no user message")
}

// userContent reads a user message's content: a string, or a list of
// parts whose text parts join into its text and whose media parts (image,
// audio, video, document) are its files. A media part's source is "data"
// (base64 bytes, which convo stores as a file: its mimeType declared, its
// metadata's filename, if any, the file's name), "url" (one of convo's
// own file URLs, as MESSAGES_SNAPSHOT gives them) or "file" (a convo file
// id).
func userContent(field string, content json.RawMessage) (string, []httpx.Attachment, error) {
	content = bytes.TrimSpace(content)
	if len(content) == 0 || content[0] != '[' {
		text, err := messageText(field, content)
		return text, nil, err
	}
	var parts []inputPart
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", nil, wire.Invalid(field, "must be a string or a list of parts")
	}
	var text bytes.Buffer
	var atts []httpx.Attachment
	for j, p := range parts {
		pf := fmt.Sprintf("%s[%d]", field, j)
		switch p.Type {
		case "text":
			text.WriteString(p.Text)
		case "image", "audio", "video", "document":
			a, err := mediaAttachment(pf, p)
			if err != nil {
				return "", nil, err
			}
			atts = append(atts, a)
		default:
			return "", nil, wire.Invalid(pf, "convo takes text, image, audio, video and document parts, got a %q part", p.Type)
		}
	}
	return text.String(), atts, nil
}

// mediaAttachment reads a media part (see userContent).
func mediaAttachment(field string, p inputPart) (httpx.Attachment, error) {
	a := httpx.Attachment{Field: field, Filename: "file"}
	var meta struct {
		Filename string `json:"filename"`
	}
	if json.Unmarshal(p.Metadata, &meta) == nil && meta.Filename != "" {
		a.Filename = meta.Filename
	}
	src := p.Source
	if src == nil {
		return a, wire.Invalid(field+".source", "is required")
	}
	a.MediaType = src.MimeType
	switch src.Type {
	case "data":
		data, err := base64.StdEncoding.DecodeString(src.Value)
		if err != nil {
			return a, wire.Invalid(field+".source.value", "is not valid base64: %v", err)
		}
		if src.MimeType == "" {
			return a, wire.Invalid(field+".source.mimeType", "is required with data")
		}
		a.Data = data
	case "url":
		id, ok := httpx.FileURLID(src.Value)
		if !ok {
			return a, wire.Invalid(field+".source.value", "must be one of convo's file URLs (/v1/files/{id}/content): convo fetches no other URL; send the bytes as data, or upload them (POST /v1/files)")
		}
		a.ID = id
	case "file":
		id, err := wire.RequireID(field+".source.value", src.Value)
		if err != nil {
			return a, err
		}
		a.ID = id
	default:
		return a, wire.Invalid(field+".source.type", "must be data, url or file, got %q", src.Type)
	}
	return a, nil
}

// messageText is a message's text: its content string, or its text parts
// joined. Other parts are refused (a tool message's content is text).
func messageText(field string, content json.RawMessage) (string, error) {
	content = bytes.TrimSpace(content)
	if len(content) == 0 || content[0] != '[' {
		var text string
		if err := json.Unmarshal(content, &text); err != nil {
			return "", wire.Invalid(field, "must be a string or a list of parts")
		}
		return text, nil
	}
	var parts []inputPart
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", wire.Invalid(field, "must be a string or a list of parts")
	}
	var text bytes.Buffer
	for j, p := range parts {
		if p.Type != "text" {
			return "", wire.Invalid(fmt.Sprintf("%s[%d]", field, j), "convo takes text only, got a %q part", p.Type)
		}
		text.WriteString(p.Text)
	}
	return text.String(), nil
}

// modelConfig reads the model configuration from forwardedProps.model (a
// convo.v1.ModelConfig in proto3 JSON), checked as SendMessage checks its
// model; none (nil) is the default model for a new message, the edited
// message's reply's for an edit.
func modelConfig(props json.RawMessage) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if len(bytes.TrimSpace(props)) == 0 || json.Unmarshal(props, &fields) != nil {
		return nil, nil // not an object: nothing for convo
	}
	raw, ok := fields["model"]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	return wire.ParseModelConfig("forwardedProps.model", raw)
}

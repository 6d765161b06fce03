package aisdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// MaxChatRequestBytes bounds a useChat request (DefaultChatTransport
// sends the client's copy of the whole chat; docs/protocols.md shows how
// to send only the last message).
const MaxChatRequestBytes = 8 << 20

// Handler serves the AI SDK's UI message stream protocol: a conversation
// is a chat, a reply its assistant message.
type Handler struct{ srv *httpx.Server }

// New returns the handler of POST /v1/ai-sdk/chat and GET
// /v1/ai-sdk/chat/{id}/stream, /messages and POST
// /v1/ai-sdk/chat/{id}/stop.
func New(srv *httpx.Server) *Handler { return &Handler{srv: srv} }

// The triggers of DefaultChatTransport's requests.
const (
	triggerSubmit     = "submit-message"
	triggerRegenerate = "regenerate-message"
)

// Chat serves POST /v1/ai-sdk/chat, the request of the AI SDK's
// DefaultChatTransport: {id, messages, trigger, messageId}, the chat id
// being the conversation id. submit-message sends the text of the last
// message (the user's) as a convo message, creating the conversation,
// owned by the caller, when no conversation has the id; with messageId it
// is useChat's edit of that message, a new version of its turn (see
// edit.go); regenerate-message runs a reply (messageId, or the latest)
// again as a new version. The response is the UI
// message stream of that prompt's reply, until it ends. The prompt does
// not depend on the request: a client that goes away resumes with GET
// /v1/ai-sdk/chat/{id}/stream. A submit-message whose last message is the
// assistant's answers the reply's input requests (see answer).
func (h *Handler) Chat(w http.ResponseWriter, r *http.Request) {
	owner, req, ok := httpx.WriteRequest(h.srv, w, r, decodeChatRequest)
	if !ok {
		return
	}
	if req.answers != nil {
		h.answer(w, r, owner, req)
		return
	}
	ctx := r.Context()
	var err error
	created := false
	if req.trigger == triggerSubmit {
		_, created, err = h.srv.Store.EnsureConversation(ctx, owner, req.id)
	} else {
		_, err = h.srv.Store.Conversation(ctx, owner, req.id)
	}
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	// The conversation must exist to be subscribed to, before the prompt
	// is queued: a refusal in between (the stream limit, the cap on
	// prompts in flight) deletes the one this request created.
	queued := false
	if created {
		defer func() {
			if !queued {
				h.srv.DiscardCreated(ctx, owner, req.id)
			}
		}()
	}
	var edit editTarget
	if req.edit {
		st, err := h.srv.Store.State(ctx, owner, req.id)
		if err == nil {
			edit, err = findEditTarget(st.Messages, req)
		}
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
	}
	// Subscribe before the prompt is queued, so that no event of its reply
	// can be missed.
	sub, err := h.srv.Hub.Open(ctx, stream.OpenParams{OwnerID: owner, ConversationID: req.id, Branches: true})
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer sub.Close()
	sub.ReleaseSnapshot() // the reply is new: nothing of the snapshot is sent
	if len(req.attachments) > h.srv.MaxAttachments() {
		h.srv.WriteError(w, r, wire.Invalid(fmt.Sprintf("messages[%d].parts", len(req.Messages)-1),
			"holds %d files; a message holds at most %d (the server's files per message)", len(req.attachments), h.srv.MaxAttachments()))
		return
	}
	// The inline files are stored before the message that holds them.
	fileIDs, err := h.srv.StoreAttachments(ctx, owner, req.attachments)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	var promptID, messageID uuid.UUID
	switch {
	case req.trigger == triggerSubmit && edit.message != uuid.Nil:
		ed, err := h.srv.Store.EditMessage(ctx, conversation.EditParams{
			OwnerID: owner, ConversationID: req.id, MessageID: edit.message, Text: req.text, ModelConfig: req.model,
			FileIDs: fileIDs,
		})
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
		promptID, messageID = ed.PromptID, ed.AssistantMessageID
	case req.trigger == triggerSubmit:
		model := req.model
		if model == nil { // an edit of a message convo never got: a new one
			model = json.RawMessage("{}")
		}
		sent, err := h.srv.Store.SendMessage(ctx, conversation.SendMessageParams{
			OwnerID: owner, ConversationID: req.id, Text: req.text, ModelConfigs: []json.RawMessage{model},
			FileIDs: fileIDs,
		})
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
		promptID, messageID = sent.PromptIDs[0], sent.AssistantMessageIDs[0]
	default:
		re, err := h.srv.Store.RegenerateReply(ctx, conversation.RegenerateParams{
			OwnerID: owner, ConversationID: req.id, MessageID: req.messageID, ModelConfig: req.model,
		})
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
		promptID, messageID = re.PromptID, re.MessageID
	}
	queued = true
	h.streamUIReply(w, r, sub, newUIReply(promptID.String(), messageID.String()))
}

// answer serves a useChat request that answers input requests: the
// POST that addToolApprovalResponse or addToolOutput makes (its last
// message the assistant's, with tool parts approval-responded,
// output-available or output-error). The parts whose tool calls'
// requests are pending are answered together with AnswerInputs, all or
// nothing (one refused, naming its part, records none); the response is
// the rest of the reply, as it resumes, continuing the client's copy of
// it (no part sent again). A part whose request is answered already (the
// first answer won), expired or cancelled is skipped: FailedPrecondition,
// changing nothing, when the request answers no pending one.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, owner string, req *chatRequest) {
	ctx := r.Context()
	// Subscribe before answering, so that no event of the resumed reply
	// can be missed.
	sub, err := h.srv.Hub.Open(ctx, stream.OpenParams{OwnerID: owner, ConversationID: req.id, Branches: true})
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer sub.Close()
	st, _ := sub.Snapshot()
	sub.ReleaseSnapshot()
	targets := answerTargets(&st)
	var answers []httpx.Answer
	for _, a := range req.answers {
		// A part names its tool call by its block; a part of no tool call
		// in the snapshot answers nothing.
		if t, ok := targets[a.toolCallID]; ok {
			answers = append(answers, httpx.Answer{Field: a.field, ToolCallID: t.callID, Read: a.inputAnswer})
		}
	}
	none := func(httpx.Answer) error {
		return wire.Invalid(fmt.Sprintf("messages[%d]", len(req.Messages)-1), "answers no input request of this chat's replies")
	}
	if len(answers) == 0 {
		h.srv.WriteError(w, r, none(httpx.Answer{}))
		return
	}
	answered, err := h.srv.AnswerInputs(ctx, owner, st.PendingInputs, answers, none)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	// The reply is the message of the (last) answered request's prompt.
	var reply *conversation.Message
	for _, t := range targets {
		if t.callID == answered[len(answered)-1].ToolCallID {
			reply = t.message
		}
	}
	ur, err := continued(*reply, st.PendingInputs)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	given := map[uuid.UUID]bool{}
	for _, in := range answered {
		given[in.ToolCallID] = true
	}
	for _, in := range st.PendingInputs {
		if in.PromptID == reply.PromptID.UUID && in.Status == conversation.InputPending && !given[in.ToolCallID] {
			// Another request of the reply still waits: so does the prompt.
			ur.finish(uiFinishPause, "")
			break
		}
	}
	h.streamUIReply(w, r, sub, ur)
}

// Resume serves GET /v1/ai-sdk/chat/{id}/stream, which useChat({resume:
// true}) calls on load: 204 when no reply is being written, else the
// newest unfinished reply's UI message stream from its start (what it
// holds so far, from the database, then the rest live), so that the
// client's message is whole. A reply whose prompt waits for a request
// is not being written (204): /messages shows the request.
func (h *Handler) Resume(w http.ResponseWriter, r *http.Request) {
	owner, id, err := h.srv.Caller(r)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	ctx := r.Context()
	sub, err := h.srv.Hub.Open(ctx, stream.OpenParams{OwnerID: owner, ConversationID: id, Branches: true})
	noReply := func() {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
	}
	if conversation.ErrorCode(err) == conversation.NotFound {
		// useChat asks on every load, a new chat's too: a chat convo does
		// not know (or another user's: the two look alike) has no reply
		// running, rather than being an error that breaks the page.
		noReply()
		return
	}
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer sub.Close()
	st, _ := sub.Snapshot()
	m := runningReply(st)
	if m == nil {
		noReply()
		return
	}
	for _, in := range st.PendingInputs {
		if in.PromptID == m.PromptID.UUID && in.Status == conversation.InputPending {
			noReply()
			return
		}
	}
	reply := newUIReply(m.PromptID.UUID.String(), m.ID.String())
	if err := reply.resume(*m, st.PendingInputs); err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	sub.ReleaseSnapshot() // the reply's chunks so far hold what the stream needs of it
	h.streamUIReply(w, r, sub, reply)
}

// runningReply is the assistant message of the conversation's active
// prompt (its newest unfinished one), nil when there is none.
func runningReply(st conversation.State) *conversation.Message {
	active := st.Conversation.ActivePromptID
	if !active.Valid {
		return nil
	}
	for i := len(st.Messages) - 1; i >= 0; i-- {
		m := &st.Messages[i]
		if m.PromptID == active && (m.Status == conversation.MessagePending || m.Status == conversation.MessageProcessing) {
			return m
		}
	}
	return nil
}

// OlderPageTokenHeader is the response header of a messages read that
// left older messages out: GET …/messages?page_token= with its value
// answers them, a page at a time.
const OlderPageTokenHeader = "Convo-Older-Page-Token"

// Messages serves GET /v1/ai-sdk/chat/{id}/messages: the conversation
// as UIMessage[] (see uiMessages), for useChat's initial messages: its
// latest messages that fit the snapshot size, or with ?page_token= the
// page before the token; OlderPageTokenHeader names the messages before
// those.
func (h *Handler) Messages(w http.ResponseWriter, r *http.Request) {
	owner, id, err := h.srv.Caller(r)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	// Held until the answer is written: a client that does not read
	// holds its place (httpx.Server.Reads).
	release, err := h.srv.Reads.Acquire(owner)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	defer release()
	read, err := h.srv.ReadMessages(r, owner, id)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	messages, err := uiMessages(read.State, h.srv.URLs)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	header := w.Header()
	header.Set("Content-Type", "application/json")
	header.Set("Cache-Control", "no-store")
	if read.OlderPageToken != "" {
		header.Set(OlderPageTokenHeader, read.OlderPageToken)
	}
	_ = json.NewEncoder(w).Encode(messages)
}

// stopResponse is the body of POST /v1/ai-sdk/chat/{id}/stop.
type stopResponse struct {
	// Cancelled names the prompts the request cancelled (none when no
	// reply was being written).
	Cancelled []string `json:"cancelled"`
}

// MaxStopBytes bounds the body of a stop request, which has none.
const MaxStopBytes = 1 << 10

// maxStops bounds how many unfinished prompts one stop cancels.
const maxStops = 16

// Stop serves POST /v1/ai-sdk/chat/{id}/stop: cancels the
// conversation's unfinished prompts, newest first (their partial replies
// stay), for useChat's stop(). Stopping a chat with no reply running
// cancels nothing and succeeds.
func (h *Handler) Stop(w http.ResponseWriter, r *http.Request) {
	owner, id, err := h.srv.Caller(r)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	ctx := r.Context()
	res := stopResponse{Cancelled: []string{}}
	seen := map[uuid.UUID]bool{}
	for range maxStops {
		c, err := h.srv.Store.Conversation(ctx, owner, id)
		if err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
		p := c.ActivePromptID
		if !p.Valid || seen[p.UUID] {
			break
		}
		seen[p.UUID] = true
		cancelled, err := h.srv.Store.CancelPrompt(ctx, owner, p.UUID)
		switch {
		case conversation.ErrorCode(err) == conversation.FailedPrecondition:
			// It finished meanwhile: nothing to stop there.
		case err != nil:
			h.srv.WriteError(w, r, err)
			return
		case cancelled:
			res.Cancelled = append(res.Cancelled, p.UUID.String())
		}
	}
	header := w.Header()
	header.Set("Content-Type", "application/json")
	header.Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(res)
}

// streamUIReply answers with the reply's UI message stream: its chunks so
// far, then those of the conversation's events, until the reply ends
// ("data: [DONE]"). A stream cut off before (the server shutting down,
// the client reading too slowly) is aborted, not ended, so that the
// client sees a dropped connection and resumes.
func (h *Handler) streamUIReply(w http.ResponseWriter, r *http.Request, sub *wire.Subscription, reply *uiReply) {
	ctx := r.Context()
	w.Header().Set(uiStreamHeader, uiStreamVersion)
	out, err := h.srv.StartSSE(w)
	if err != nil {
		return
	}
	defer out.End()
	if err := out.JSONEvents(reply.flush()); err != nil {
		return
	}
	for !reply.done {
		item, err := h.srv.Next(ctx, r, sub, out)
		if err != nil {
			h.srv.StreamEnded(r, err, sub.Cursor())
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, stream.ErrDeleted) {
				_ = out.JSONEvents([]any{&uiErrorChunk{Type: uiError, ErrorText: "the conversation was deleted"}})
				_ = out.Event("", "", []byte(uiStreamDone))
				return
			}
			panic(http.ErrAbortHandler)
		}
		reply.apply(item.Payload.GetEvent())
		if err := out.JSONEvents(reply.flush()); err != nil {
			return
		}
	}
	_ = out.Event("", "", []byte(uiStreamDone))
}

// chatRequest is DefaultChatTransport's request body. Other fields (what
// useChat's body option adds) are ignored, but for model.
type chatRequest struct {
	ID        *string       `json:"id"`
	Messages  []chatMessage `json:"messages"`
	Trigger   *string       `json:"trigger"`
	MessageID string        `json:"messageId"`
	// Model is the model configuration (convo.v1 ModelConfig in proto3
	// JSON, as SendMessage's model); none: the default model, or for a
	// regenerated reply the model of the reply it replaces.
	Model json.RawMessage `json:"model"`

	id      uuid.UUID
	trigger string
	text    string
	// attachments are the files of the user's message (its file parts).
	attachments []httpx.Attachment
	messageID   uuid.NullUUID
	model       json.RawMessage
	// edit: a submit-message with messageId, useChat's edit of a user
	// message (see edit.go).
	edit bool
	// answers are those of a submit-message whose last message is the
	// assistant's (nil for a user's message).
	answers []chatAnswer
}

// chatMessage is a UIMessage as the client sends it.
type chatMessage struct {
	ID    string            `json:"id"`
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

type chatPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
	// A file part's (FileUIPart).
	MediaType string `json:"mediaType"`
	Filename  string `json:"filename"`
	URL       string `json:"url"`
}

// decodeChatRequest reads and checks a useChat request. Errors are
// Invalid, naming the field.
func decodeChatRequest(w http.ResponseWriter, r *http.Request) (*chatRequest, error) {
	var req chatRequest
	if err := httpx.DecodeJSON(w, r, MaxChatRequestBytes, &req, "a useChat request (a JSON object with id, messages and trigger)"); err != nil {
		return nil, err
	}
	if req.ID == nil {
		return nil, wire.Invalid("id", "is required (the chat id, a conversation id)")
	}
	id, err := wire.RequireID("id", *req.ID)
	if err != nil {
		return nil, err
	}
	req.id = id
	if req.Trigger == nil {
		return nil, wire.Invalid("trigger", "is required (%s or %s)", triggerSubmit, triggerRegenerate)
	}
	req.trigger = *req.Trigger
	switch req.trigger {
	case triggerSubmit:
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "assistant" {
			if req.answers, err = chatAnswers(req.Messages); err != nil {
				return nil, err
			}
			return &req, nil
		}
		if req.text, req.attachments, err = lastUserMessage(req.Messages); err != nil {
			return nil, err
		}
		if req.MessageID != "" {
			// useChat's edit (sendMessage with a messageId) posts the
			// edited message last, under the id it replaces.
			if last := req.Messages[len(req.Messages)-1].ID; last != req.MessageID {
				return nil, wire.Invalid("messageId", "%q is not the id of the last message (%q): an edit sends the edited message last",
					clip(req.MessageID), clip(last))
			}
			req.edit = true
		}
	case triggerRegenerate:
		if req.MessageID != "" {
			m, err := wire.RequireID("messageId", req.MessageID)
			if err != nil {
				return nil, err
			}
			req.messageID = uuid.NullUUID{UUID: m, Valid: true}
		}
	default:
		t := *req.Trigger
		if len(t) > 64 {
			t = t[:64] + "…"
		}
		return nil, wire.Invalid("trigger", "%q is not a trigger convo knows; want %s or %s", t, triggerSubmit, triggerRegenerate)
	}
	if req.model, err = chatModel(req.Model, req.trigger == triggerRegenerate || req.edit); err != nil {
		return nil, err
	}
	return &req, nil
}

// lastUserMessage reads the last message, which must be the user's: its
// text parts joined, and its file parts (FileUIPart: mediaType,
// filename, url) as attachments (Chat bounds how many). A file
// part's url is a data: URL (the bytes, which convo stores as a file), or
// one of convo's own file URLs (a file convo holds, as /messages returns
// it). Other parts are refused. Text is required unless the message
// holds files.
func lastUserMessage(messages []chatMessage) (string, []httpx.Attachment, error) {
	if len(messages) == 0 {
		return "", nil, wire.Invalid("messages", "is required: the chat's messages, the last one the user's")
	}
	i := len(messages) - 1
	m := messages[i]
	if m.Role != "user" {
		return "", nil, wire.Invalid(fmt.Sprintf("messages[%d].role", i), "the last message must be the user's, got %q", m.Role)
	}
	var text bytes.Buffer
	var atts []httpx.Attachment
	for j, raw := range m.Parts {
		field := fmt.Sprintf("messages[%d].parts[%d]", i, j)
		var p chatPart
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", nil, wire.Invalid(field, "is not a message part: %v", err)
		}
		switch p.Type {
		case "text":
			if p.Text == nil {
				return "", nil, wire.Invalid(field+".text", "is required")
			}
			text.WriteString(*p.Text)
		case "file":
			a, err := fileAttachment(field, p)
			if err != nil {
				return "", nil, err
			}
			atts = append(atts, a)
		default:
			return "", nil, wire.Invalid(field, "convo takes text and file parts, got a %q part", p.Type)
		}
	}
	if len(atts) > 0 {
		return text.String(), atts, wire.CheckText(fmt.Sprintf("messages[%d].parts", i), text.String(), false, wire.MaxMessageText)
	}
	if text.Len() == 0 {
		return "", nil, wire.Invalid(fmt.Sprintf("messages[%d].parts", i), "has no text: the user's message must have a text part or a file part")
	}
	return text.String(), nil, wire.CheckMessageText(fmt.Sprintf("messages[%d].parts", i), text.String())
}

// fileAttachment reads a file part: a data: URL's bytes, or a file of
// convo's named by its URL.
func fileAttachment(field string, p chatPart) (httpx.Attachment, error) {
	a := httpx.Attachment{Field: field, Filename: p.Filename, MediaType: p.MediaType}
	if id, ok := httpx.FileURLID(p.URL); ok {
		a.ID = id
		return a, nil
	}
	if !strings.HasPrefix(p.URL, "data:") {
		return a, wire.Invalid(field+".url", "must be a data: URL (the file's bytes) or one of convo's file URLs (/v1/files/{id}/content)")
	}
	mediaType, data, err := httpx.ReadDataURL(field+".url", p.URL)
	if err != nil {
		return a, err
	}
	if a.MediaType == "" {
		a.MediaType = mediaType
	}
	if a.Filename == "" {
		a.Filename = "file"
	}
	a.Data = data
	return a, nil
}

// chatModel checks the request's model configuration as SendMessage
// checks its model. None: "{}" (the default model) for a new message, nil
// (the replaced turn's model) for a new version of a turn (a regenerated
// reply, an edited message).
func chatModel(raw json.RawMessage, newVersion bool) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		if newVersion {
			return nil, nil
		}
		return json.RawMessage("{}"), nil
	}
	return wire.ParseModelConfig("model", raw)
}

package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// Handler serves OpenAI's Responses API: a response is a reply.
type Handler struct {
	srv *httpx.Server
	// models are the model names a request may name (none: any).
	models []string
}

// New returns the handler of /v1/responses; models are the model names a
// request may name (the workers' models), none: any name, passed on to
// the workers as the prompt's model.
func New(srv *httpx.Server, models []string) *Handler { return &Handler{srv: srv, models: models} }

// Routes registers the routes on mux, each authenticated first (a bearer
// token: the SDK's apiKey) and refusing in OpenAI's error shape.
func (h *Handler) Routes(mux *http.ServeMux) {
	route := func(pattern string, f http.HandlerFunc) { mux.Handle(pattern, h.srv.WithUserOr(f, h.writeError)) }
	route("POST /v1/responses", h.srv.JSONBodyOr(MaxCreateBytes, false, h.Create, h.writeError))
	route("GET /v1/responses/{id}", h.Retrieve)
	route("POST /v1/responses/{id}/cancel", h.srv.JSONBodyOr(MaxCreateBytes, true, h.Cancel, h.writeError))
	route("DELETE /v1/responses/{id}", h.Delete)
	route("GET /v1/responses/{id}/input_items", h.InputItems)
	h.conversationRoutes(route)
}

// Create serves POST /v1/responses: it sends input as the user's message
// (to conversation, after previous_response_id's reply, or in a new
// conversation) and answers with the reply's Response: at once with
// background (queued), with stream its events as they come, else when
// the reply ends. The reply does not depend on the request: a client that
// goes away resumes with GET /v1/responses/{id}?stream=true.
func (h *Handler) Create(w http.ResponseWriter, r *http.Request) {
	// As httpx.WriteRequest: authenticated, then the body read, then a
	// write token taken (a request refused for its input costs none).
	owner, ok := h.user(w, r)
	if !ok {
		return
	}
	req, err := decodeCreate(h.models)(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !h.allowWrite(w, r, owner) {
		return
	}
	ctx := r.Context()
	conv := req.conversationID
	var prev conversation.Trace
	if req.previous != uuid.Nil {
		if prev, err = h.trace(ctx, owner, req.previous); err != nil {
			if _, ok := err.(*apiError); ok { // not found, or deleted
				err = invalid("previous_response_id", "previous_response_not_found",
					"Previous response with id '"+segmentID(req.previous, req.previousSegment)+"' not found.")
			}
			h.writeError(w, r, err)
			return
		}
		prevReply, err := checkPrevious(prev, req)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if req.outputs != nil {
			h.continueReply(w, r, owner, req, prev, prevReply)
			return
		}
		conv = prev.Prompt.ConversationID
	}
	created := false
	if conv == uuid.Nil {
		// A new conversation, made before the subscription that must
		// precede the send; a refusal after deletes it again.
		conv = uuid.New()
		if _, _, err := h.srv.Store.EnsureConversation(ctx, owner, conv); err != nil {
			h.writeError(w, r, err)
			return
		}
		created = true
	} else if _, err := h.srv.Store.Conversation(ctx, owner, conv); err != nil {
		if conversation.ErrorCode(err) == conversation.NotFound {
			err = &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "conversation", code: "not_found",
				message: "Conversation with id '" + conv.String() + "' not found."}
		}
		h.writeError(w, r, err)
		return
	}
	queued := false
	if created {
		defer func() {
			if !queued {
				h.srv.DiscardCreated(ctx, owner, conv)
			}
		}()
	}
	sub, err := h.subscribe(ctx, req, owner, conv)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if sub != nil {
		defer sub.Close()
	}
	fileIDs, err := h.storeFiles(ctx, owner, req.attachments)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	promptID, err := h.send(ctx, owner, conv, req, prev, fileIDs)
	if err != nil {
		h.writeError(w, r, fileRefusal(err, req.attachments))
		return
	}
	queued = true
	tr, err := h.trace(ctx, owner, promptID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.respond(w, r, req, sub, tr, foldTrace(tr))
}

// subscribe opens the subscription that a streamed or a waited-for
// response reads (none for a background one without stream), before the
// write that queues its reply, so that a refusal (the stream limit)
// writes nothing. The fold reads the prompt's own events from the log,
// so the snapshot is released at once.
func (h *Handler) subscribe(ctx context.Context, req *createRequest, owner string, conv uuid.UUID) (*wire.Subscription, error) {
	if req.Background && !req.Stream {
		return nil, nil
	}
	sub, err := h.srv.Hub.Open(ctx, stream.OpenParams{OwnerID: owner, ConversationID: conv, Branches: true})
	if err != nil {
		return nil, err
	}
	sub.ReleaseSnapshot()
	return sub, nil
}

// respond answers a POST /v1/responses as it asked: the event stream,
// the Response at once (background), or the Response when the reply ends.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request, req *createRequest, sub *wire.Subscription, tr conversation.Trace, rep *reply) {
	switch {
	case req.Stream:
		h.stream(w, r, sub, tr, rep, -1)
	case req.Background:
		writeJSON(w, rep.snapshot())
	default:
		if err := h.wait(r.Context(), sub, tr, rep); err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, rep.snapshot())
	}
}

// send writes the user's message, holding fileIDs, and queues the reply: after the
// previous response's reply when there is one (its branch made active
// first; when the reply already has a following message, the text is a
// new version of that message: a branch), all in one statement that a
// refusal undoes whole, else at the conversation's active leaf. It
// returns the reply's prompt.
func (h *Handler) send(ctx context.Context, owner string, conv uuid.UUID, req *createRequest, prev conversation.Trace, fileIDs []uuid.UUID) (uuid.UUID, error) {
	if req.previous != uuid.Nil {
		sent, err := h.srv.Store.SendAfter(ctx, conversation.SendAfterParams{OwnerID: owner, ConversationID: conv,
			AfterMessageID: prev.Prompt.MessageID, Text: req.text, ModelConfig: req.config, FileIDs: fileIDs})
		if err != nil {
			return uuid.Nil, err
		}
		return sent.PromptID, nil
	}
	sent, err := h.srv.Store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: owner, ConversationID: conv,
		Text: req.text, ModelConfigs: []json.RawMessage{req.config}, FileIDs: fileIDs})
	if err != nil {
		return uuid.Nil, err
	}
	return sent.PromptIDs[0], nil
}

// trace reads the prompt and its events; an unknown, foreign or deleted
// prompt is OpenAI's 404 (an *apiError).
func (h *Handler) trace(ctx context.Context, owner string, promptID uuid.UUID) (conversation.Trace, error) {
	tr, err := h.srv.Store.Trace(ctx, owner, uuid.NullUUID{UUID: promptID, Valid: true}, uuid.NullUUID{})
	if conversation.ErrorCode(err) == conversation.NotFound {
		return tr, notFound(responseID(promptID))
	}
	if err != nil {
		return tr, err
	}
	if deleted, err := h.srv.Store.ResponseDeleted(ctx, promptID); err != nil || deleted {
		if deleted {
			err = notFound(responseID(promptID))
		}
		return conversation.Trace{}, err
	}
	return tr, nil
}

// foldTrace folds a prompt's logged events (compacted deltas split
// again) into a new reply.
func foldTrace(tr conversation.Trace) *reply {
	rep := newReply(head(tr.Prompt), tr.Prompt.ID.String(), tr.Prompt.MessageID.String())
	for _, e := range tr.Events {
		rep.pending = append(rep.pending, rep.feed(e)...)
	}
	return rep
}

// lastSeq is the seq of the trace's last event.
func lastSeq(tr conversation.Trace) int64 {
	if n := len(tr.Events); n > 0 {
		return tr.Events[n-1].Seq
	}
	return 0
}

// feed folds one logged event of the prompt (split again when compaction
// merged it) and returns the stream events it made.
func (r *reply) feed(e conversation.Event) []any {
	var out []any
	if u := usageOf(e); u != nil && !r.ended {
		r.head.Usage = u // before the fold: response.completed carries it
	}
	for _, one := range split(e) {
		ev, err := wire.Event(one)
		if err != nil {
			continue // an event no reader decodes: nothing to show of it
		}
		out = append(out, r.apply(ev)...)
	}
	return out
}

// head is the Response's fields that do not change: its id, time,
// conversation, and what its request asked (kept in the prompt's model
// configuration).
func head(p conversation.Prompt) response {
	var cfg modelConfig
	_ = json.Unmarshal(p.ModelConfig, &cfg)
	resp := response{ID: responseID(p.ID), CreatedAt: p.CreatedAt.Unix(), Model: cfg.Model, Metadata: map[string]string{},
		Conversation: &conversationRef{ID: p.ConversationID.String()}, Store: true, ParallelToolCalls: true,
		ToolChoice: "auto", Tools: []json.RawMessage{}, Truncation: "disabled", Text: json.RawMessage(`{"format":{"type":"text"}}`),
		Temperature: cfg.Temperature}
	if o := cfg.OpenAI; o != nil {
		resp.Background = o.Background
		if o.Metadata != nil {
			resp.Metadata = o.Metadata
		}
		if o.PreviousResponseID != "" {
			resp.PreviousResponseID = &o.PreviousResponseID
		}
		resp.Instructions = o.Instructions
		if o.Tools != nil {
			resp.Tools = o.Tools
		}
	}
	return resp
}

// wait folds the prompt's events from the subscription until the reply
// ends.
func (h *Handler) wait(ctx context.Context, sub *wire.Subscription, tr conversation.Trace, rep *reply) error {
	after := lastSeq(tr)
	for !rep.ended {
		item, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if item.Err == nil && item.Event.Seq > after && item.Event.PromptID.UUID == tr.Prompt.ID {
			rep.feed(item.Event)
		}
	}
	return nil
}

// stream answers with the response's event stream: the events numbered
// above startingAfter that the log holds, then the rest live, until the
// reply ends. A stream cut off before (the server shutting down, a client
// reading too slowly) is aborted, not ended, so that the client sees a
// dropped connection and resumes.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, sub *wire.Subscription, tr conversation.Trace, rep *reply, startingAfter int64) {
	ctx := r.Context()
	out, err := h.srv.StartSSE(w)
	if err != nil {
		return
	}
	defer out.End()
	write := func(events []any) error {
		for _, e := range events {
			if seqOf(e) <= startingAfter {
				continue
			}
			data, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := out.Event("", typeOf(e), data); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write(rep.pending); err != nil {
		return
	}
	rep.pending = nil
	after := lastSeq(tr)
	for !rep.ended {
		item, err := h.srv.Next(ctx, r, sub, out)
		if err != nil {
			h.srv.StreamEnded(r, err, sub.Cursor())
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, stream.ErrDeleted) {
				e := errorEvent{Type: "error", SequenceNumber: rep.next, Code: "not_found",
					Message: "the response's conversation was deleted"}
				e.Error.Type, e.Error.Code, e.Error.Message = "invalid_request_error", e.Code, e.Message
				_ = write([]any{e})
				return
			}
			panic(http.ErrAbortHandler)
		}
		if item.Event.Seq <= after || item.Event.PromptID.UUID != tr.Prompt.ID {
			continue
		}
		if err := write(rep.feed(item.Event)); err != nil {
			return
		}
	}
}

func seqOf(e any) int64 {
	switch e := e.(type) {
	case streamEvent:
		return e.SequenceNumber
	case errorEvent:
		return e.SequenceNumber
	}
	return 0
}

func typeOf(e any) string {
	switch e := e.(type) {
	case streamEvent:
		return e.Type
	case errorEvent:
		return e.Type
	}
	return ""
}

// Retrieve serves GET /v1/responses/{id}: the Response as it stands;
// with stream=true its event stream, from the start or after
// starting_after, live until the reply ends.
func (h *Handler) Retrieve(w http.ResponseWriter, r *http.Request) {
	owner, promptID, seg, ok := h.caller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	streaming := q.Get("stream") == "true" || streamInBody(w, r)
	startingAfter := int64(-1)
	if s := q.Get("starting_after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			h.writeError(w, r, invalid("starting_after", "invalid_value", "starting_after must be a sequence_number (an integer from 0)."))
			return
		}
		startingAfter = n
	}
	ctx := r.Context()
	tr, err := h.trace(ctx, owner, promptID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	rep, err := foldSegment(tr, seg)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !streaming {
		writeJSON(w, rep.snapshot())
		return
	}
	var sub *wire.Subscription
	if !rep.ended {
		// Subscribe, then read the log again: every event after it is
		// the subscription's.
		if sub, err = h.srv.Hub.Open(ctx, stream.OpenParams{OwnerID: owner, ConversationID: tr.Prompt.ConversationID, Branches: true}); err != nil {
			h.writeError(w, r, err)
			return
		}
		defer sub.Close()
		sub.ReleaseSnapshot()
		if tr, err = h.trace(ctx, owner, promptID); err != nil {
			h.writeError(w, r, err)
			return
		}
		if rep, err = foldSegment(tr, seg); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	h.stream(w, r, sub, tr, rep, startingAfter)
}

// streamInBody reports whether a GET's body is {"stream": true}: the Go
// SDK's GetStreaming asks so (the others put stream in the query).
func streamInBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return false
	}
	var body struct {
		Stream bool `json:"stream"`
	}
	return json.NewDecoder(http.MaxBytesReader(w, r.Body, maxGetBody)).Decode(&body) == nil && body.Stream
}

// maxGetBody bounds what a GET's body is read of.
const maxGetBody = 1 << 10

func finished(s conversation.PromptStatus) bool {
	return s == conversation.PromptCompleted || s == conversation.PromptFailed || s == conversation.PromptCancelled
}

// user is the authenticated caller; without one (a route mounted without
// the auth middleware) it answers 401 itself and reports false.
func (h *Handler) user(w http.ResponseWriter, r *http.Request) (string, bool) {
	owner, ok := conversation.UserFromContext(r.Context())
	if !ok {
		h.writeError(w, r, conversation.Errorf(conversation.Unauthenticated, "no authenticated user in the request context"))
	}
	return owner, ok
}

// allowWrite takes one of owner's write tokens (the write rate every
// route that writes shares); refused, it answers the refusal itself and reports
// false. Call it after the request's input was read and checked, so that
// a request refused for its input costs no token.
func (h *Handler) allowWrite(w http.ResponseWriter, r *http.Request, owner string) bool {
	if err := h.srv.Writes.Allow(owner); err != nil {
		h.writeError(w, r, err)
		return false
	}
	return true
}

// caller authenticates and reads the {id} path parameter (the prompt and
// the segment of it the response is), answering the error itself when
// either fails.
func (h *Handler) caller(w http.ResponseWriter, r *http.Request) (string, uuid.UUID, int, bool) {
	owner, ok := h.user(w, r)
	if !ok {
		return "", uuid.Nil, 0, false
	}
	id, seg, ok := parseResponseRef(r.PathValue("id"))
	if !ok {
		h.writeError(w, r, notFound(r.PathValue("id")))
		return "", uuid.Nil, 0, false
	}
	return owner, id, seg, true
}

// Cancel serves POST /v1/responses/{id}/cancel: cancels a background
// response still queued or in progress (its partial output stays) and
// answers with it, status cancelled; a response that has ended is
// answered as it stands. A response made without background is refused,
// as OpenAI does.
func (h *Handler) Cancel(w http.ResponseWriter, r *http.Request) {
	owner, promptID, seg, ok := h.caller(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	tr, err := h.trace(ctx, owner, promptID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	rep, err := foldSegment(tr, seg)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !head(tr.Prompt).Background {
		h.writeError(w, r, invalid("", "invalid_request", "Cannot cancel a synchronous response: only a response created with background can be cancelled."))
		return
	}
	// A segment that ended (a response that ended with function calls)
	// stays as it ended: only the prompt's current one is cancelled.
	if !rep.ended && !finished(tr.Prompt.Status) {
		if !h.allowWrite(w, r, owner) {
			return
		}
		if _, err := h.srv.Store.CancelPrompt(ctx, owner, promptID); err != nil && conversation.ErrorCode(err) != conversation.FailedPrecondition {
			h.writeError(w, r, err) // FailedPrecondition: it ended meanwhile
			return
		}
		if tr, err = h.trace(ctx, owner, promptID); err != nil {
			h.writeError(w, r, err)
			return
		}
		if rep, err = foldSegment(tr, seg); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	writeJSON(w, rep.snapshot())
}

// Delete serves DELETE /v1/responses/{id}: the response is gone from the
// Responses API (GET, its stream, cancel, input_items and
// previous_response_id answer not found), while the conversation's
// messages stay, the reply's included, as an OpenAI conversation's items
// do. A response still queued or in progress is cancelled first. An
// unknown, foreign or already deleted response is 404.
func (h *Handler) Delete(w http.ResponseWriter, r *http.Request) {
	owner, promptID, seg, ok := h.caller(w, r)
	if !ok {
		return
	}
	if !h.allowWrite(w, r, owner) {
		return
	}
	if err := h.srv.Store.DeleteResponse(r.Context(), owner, promptID); err != nil {
		if conversation.ErrorCode(err) == conversation.NotFound {
			err = notFound(responseID(promptID))
		}
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, deletedResponse{ID: segmentID(promptID, seg), Object: "response.deleted", Deleted: true})
}

// deletedResponse is OpenAI's answer to a delete.
type deletedResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

func writeJSON(w http.ResponseWriter, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

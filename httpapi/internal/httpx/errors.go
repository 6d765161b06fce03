package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/wire"
)

// statuses maps each domain error code to its HTTP status and the code
// name the body carries (the Connect API's names): the one place where
// that mapping lives for every protocol.
var statuses = map[conversation.Code]struct {
	status int
	name   string
}{
	conversation.Invalid:            {http.StatusBadRequest, "invalid_argument"},
	conversation.NotFound:           {http.StatusNotFound, "not_found"},
	conversation.PermissionDenied:   {http.StatusForbidden, "permission_denied"},
	conversation.FailedPrecondition: {http.StatusConflict, "failed_precondition"},
	conversation.Unauthenticated:    {http.StatusUnauthorized, "unauthenticated"},
	conversation.Unavailable:        {http.StatusServiceUnavailable, "unavailable"},
	conversation.ResourceExhausted:  {http.StatusTooManyRequests, "resource_exhausted"},
	conversation.Internal:           {http.StatusInternalServerError, "internal"},
	// Nobody reads these two: the client left, or its deadline passed.
	conversation.Canceled:         {499, "canceled"},
	conversation.DeadlineExceeded: {http.StatusGatewayTimeout, "deadline_exceeded"},
}

// Refusal is an error answered with its own HTTP status and code name,
// for the refusals no domain code has (a file too large: 413; a signed
// URL that does not verify: 403 permission_denied). Message is shown to
// the caller as it is.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

func (e *Refusal) Error() string { return e.Message }

// errorBody is the JSON of every error response.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError answers with err as a JSON error: the one place where the
// protocols map and log failed requests (wire.Classify, through Status).
// A domain error keeps its message; anything else is logged with its
// detail and answered as internal without it.
func (s *Server) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away: nobody reads the answer
	}
	st := s.Status(w, r, err)
	w.WriteHeader(st.HTTP)
	_ = json.NewEncoder(w).Encode(errorBody{Code: st.Name, Message: st.Failure.Message})
}

// ErrorStatus is how a failed request is answered: its HTTP status, the
// Connect code name, and the failure to show.
type ErrorStatus struct {
	HTTP    int
	Name    string
	Failure wire.Failure
}

// Status maps err as WriteError does, logs it when it is the server's
// failure, and sets the headers of an error answer (JSON, no caching,
// WWW-Authenticate for 401, Retry-After): a protocol with an error body
// of its own (OpenAI's) writes the status and its body after it.
func (s *Server) Status(w http.ResponseWriter, r *http.Request, err error) ErrorStatus {
	f := wire.Classify(err)
	var tooLarge *BodyTooLarge
	if errors.As(err, &tooLarge) {
		f = wire.Failure{Code: conversation.Invalid, Message: tooLarge.Error()}
	}
	var refusal *Refusal
	if errors.As(err, &refusal) {
		f = wire.Failure{Code: conversation.Invalid, Message: refusal.Message}
	}
	if f.Log {
		s.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", conversation.RedactedPath(r.URL.Path), "code", f.Code, "err", err)
	}
	st, ok := statuses[f.Code]
	if !ok {
		st = statuses[conversation.Internal]
	}
	if f.Overloaded && f.Code == conversation.ResourceExhausted {
		// The server's load, not the caller's limit: a proxy or client
		// backs off from the server, and retries after Retry-After.
		st.status = http.StatusServiceUnavailable
	}
	if tooLarge != nil {
		st.status = http.StatusRequestEntityTooLarge // see BodyTooLarge
	}
	if refusal != nil {
		st.status, st.name = refusal.Status, refusal.Code
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if st.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="convo"`)
	}
	if f.RetryAfter > 0 {
		h.Set("Retry-After", limit.RetryAfterHeader(f.RetryAfter))
	}
	return ErrorStatus{HTTP: st.status, Name: st.name, Failure: f}
}

// DiscardCreated deletes the conversation a request created when the
// request is refused before anything was written to it (see
// conversation.Store.DeleteUntouchedConversation), so that a refusal
// changes nothing. It runs even when the client went away.
func (s *Server) DiscardCreated(ctx context.Context, owner string, id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := s.Store.DeleteUntouchedConversation(ctx, owner, id); err != nil {
		s.Logger.ErrorContext(ctx, "a refused request could not delete the conversation it created", "conversation_id", id, "err", err)
	}
}

// StreamEnded logs why a stream ended, unless the client went away or the
// end is by design (wire.Failure.Resumable, or the conversation was
// deleted), after which the client reconnects and resumes.
func (s *Server) StreamEnded(r *http.Request, err error, cursor int64) {
	if r.Context().Err() != nil {
		return
	}
	if f := wire.Classify(err); f.Resumable || f.Code == conversation.NotFound {
		s.Logger.DebugContext(r.Context(), "stream ended; the client resumes", "path", conversation.RedactedPath(r.URL.Path), "cursor", cursor, "reason", err)
		return
	}
	s.Logger.WarnContext(r.Context(), "stream failed", "path", conversation.RedactedPath(r.URL.Path), "cursor", cursor, "err", err)
}

package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/stream"
)

// statuses maps each domain error code to its HTTP status and the code
// name the body carries (the Connect API's names): the one place where
// that mapping lives for this package.
var statuses = map[conversation.Code]struct {
	status int
	name   string
}{
	conversation.Invalid:            {http.StatusBadRequest, "invalid_argument"},
	conversation.NotFound:           {http.StatusNotFound, "not_found"},
	conversation.FailedPrecondition: {http.StatusConflict, "failed_precondition"},
	conversation.Unauthenticated:    {http.StatusUnauthorized, "unauthenticated"},
	conversation.Unavailable:        {http.StatusServiceUnavailable, "unavailable"},
	conversation.ResourceExhausted:  {http.StatusTooManyRequests, "resource_exhausted"},
	conversation.Internal:           {http.StatusInternalServerError, "internal"},
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// invalid returns an Invalid error whose message names field.
func invalid(field, format string, args ...any) error {
	return conversation.Errorf(conversation.Invalid, "%s: "+format, append([]any{field}, args...)...)
}

// fromConnect turns the InvalidArgument errors of connectapi's validators
// into domain errors.
func fromConnect(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument {
		return conversation.Errorf(conversation.Invalid, "%s", ce.Message())
	}
	return err
}

// writeError answers with err as a JSON error. A domain error keeps its
// message; anything else is logged with its detail and answered as
// internal without it.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := conversation.ErrorCode(err)
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away: nobody reads the answer
	}
	// A draining server refuses streams by design: not worth an error log.
	if (code == conversation.Internal || code == conversation.Unavailable) && !errors.Is(err, stream.ErrClosed) {
		s.logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	}
	st, ok := statuses[code]
	if !ok {
		st = statuses[conversation.Internal]
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if st.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="convo"`)
	}
	if d := conversation.ErrorRetryAfter(err); d > 0 {
		h.Set("Retry-After", limit.RetryAfterHeader(d))
	}
	w.WriteHeader(st.status)
	_ = json.NewEncoder(w).Encode(errorBody{Code: st.name, Message: conversation.ErrorMessage(err)})
}

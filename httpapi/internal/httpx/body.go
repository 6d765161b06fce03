package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/wire"
)

// JSONBody wraps a state-changing route: its request must be a JSON body
// (Content-Type application/json, UTF-8) of at most limit bytes, or, when
// emptyOK, no body and no Content-Type at all. A text/plain or form body,
// which a page of any site may send without a CORS preflight, is refused
// with 415; invalid UTF-8 and a string with a lone UTF-16 surrogate
// escape (wire.CheckJSONSurrogates) and JSON that breaks convo's rule for
// accepted JSON (wire.CheckJSONBody: numbers within a 64-bit float's
// range, nesting at most 64, no \u0000) with 400; a body over limit with 413
// naming the limit (BodyTooLarge), after reading at most limit bytes of
// it (none when its Content-Length says so). A body that does not arrive
// in time (the server's read deadline) is answered 408. The checked body
// is handed on in full.
func (s *Server) JSONBody(limit int64, emptyOK bool, next http.HandlerFunc) http.HandlerFunc {
	return s.JSONBodyOr(limit, emptyOK, next, s.WriteError)
}

// JSONBodyOr is JSONBody answering a refused body with fail: a
// protocol's own error body (OpenAI's). The 415 and 408 answers keep
// convo's body; their statuses say what went wrong.
func (s *Server) JSONBodyOr(limit int64, emptyOK bool, next http.HandlerFunc, fail func(http.ResponseWriter, *http.Request, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if ct == "" && emptyOK && r.ContentLength <= 0 {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1))
			if err == nil && len(body) == 0 {
				next(w, r)
				return
			}
		}
		media, params, err := mime.ParseMediaType(ct)
		if err != nil || media != "application/json" ||
			(params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
			unsupportedMediaType(w, ct)
			return
		}
		if r.ContentLength > limit {
			fail(w, r, &BodyTooLarge{Limit: limit})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				fail(w, r, &BodyTooLarge{Limit: limit})
			case errors.Is(err, os.ErrDeadlineExceeded):
				BodyTimeout(w, err)
			default:
				fail(w, r, wire.Invalid("body", "could not be read: %v", err))
			}
			return
		}
		if !utf8.Valid(body) {
			fail(w, r, wire.Invalid("body", "is not valid UTF-8"))
			return
		}
		// encoding/json would read a lone surrogate as U+FFFD, silently.
		if err := wire.CheckJSONSurrogates(body); err != nil {
			fail(w, r, err)
			return
		}
		// convo's rule for accepted JSON, before anything decodes the
		// body: a number like 1e999999 would cost a schema big-number
		// arithmetic, and one PostgreSQL stores would make readers fail.
		if err := wire.CheckJSONBody(body); err != nil {
			fail(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next(w, r)
	}
}

// BodyTimeout answers 408 to a request whose body did not arrive in time
// (a read of it failed with os.ErrDeadlineExceeded: guard.BodyDeadline).
// It answers even though the request's context may be cancelled (over
// HTTP/1.1 the failed read cancels it): the client is still there, only
// slow, and the connection is closed after the answer.
func BodyTimeout(w http.ResponseWriter, err error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusRequestTimeout)
	_ = json.NewEncoder(w).Encode(errorBody{Code: "deadline_exceeded", Message: "body: " + err.Error()})
}

// unsupportedMediaType answers 415 with the JSON error body.
func unsupportedMediaType(w http.ResponseWriter, got string) {
	if got == "" {
		got = "none"
	} else if len(got) > 100 {
		got = got[:100] + "…"
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Accept-Post", "application/json")
	w.WriteHeader(http.StatusUnsupportedMediaType)
	_ = json.NewEncoder(w).Encode(errorBody{Code: "invalid_argument",
		Message: "Content-Type: want application/json (UTF-8), got " + got})
}

// BodyTooLarge is the error of a request body larger than its endpoint
// takes. WriteError answers it 413 Payload Too Large (not 400: the request
// may be well formed, only too big to read), code invalid_argument, with a
// message that names the limit.
type BodyTooLarge struct {
	// Limit is the most the endpoint takes, in bytes.
	Limit int64
}

func (e *BodyTooLarge) Error() string {
	return fmt.Sprintf("body: is larger than %d bytes (%s), the most this endpoint takes", e.Limit, files.BinarySize(e.Limit))
}

// DecodeJSON decodes the request's JSON body, of at most limit bytes, into
// v. Errors are BodyTooLarge for a body larger than limit, and Invalid
// naming the body when it is not what (the JSON the route takes, for the
// message).
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any, what string) error {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit)).Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &BodyTooLarge{Limit: limit}
		}
		return wire.Invalid("body", "is not %s: %v", what, err)
	}
	return nil
}

// WriteRequest starts a request that writes: it authenticates it, reads
// its body with decode, and takes one of the user's write tokens, in that
// order (a request refused for its input costs no token). It answers the
// error itself and reports false when any step fails.
func WriteRequest[T any](s *Server, w http.ResponseWriter, r *http.Request, decode func(http.ResponseWriter, *http.Request) (T, error)) (string, T, bool) {
	var zero T
	owner, err := s.authenticate(r)
	if err != nil {
		s.WriteError(w, r, err)
		return "", zero, false
	}
	in, err := decode(w, r)
	if err != nil {
		s.WriteError(w, r, err)
		return "", zero, false
	}
	if err := s.Writes.Allow(owner); err != nil {
		s.WriteError(w, r, err)
		return "", zero, false
	}
	return owner, in, true
}

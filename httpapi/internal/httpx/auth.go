package httpx

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/wire"
)

// WithUser authenticates every request before its handler runs, and so
// before a byte of its body is read: a request without a valid token is
// refused (401) with its body unread (over HTTP/1.1 the connection is
// closed after the answer, so that net/http does not read the body
// either). The user goes into the request's context, where Caller and
// WriteRequest find it.
func (s *Server) WithUser(next http.Handler) http.Handler {
	return s.WithUserOr(next, s.WriteError)
}

// WithUserOr is WithUser answering a refusal with fail: a protocol's own
// error body (OpenAI's).
func (s *Server) WithUserOr(next http.Handler, fail func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, err := s.verify(r)
		if err != nil {
			if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
				w.Header().Set("Connection", "close")
			}
			fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(conversation.WithUser(r.Context(), owner)))
	})
}

// verify returns the user the request acts for: from its Authorization
// header, or, when it has none, from the access_token query parameter,
// for EventSource, which cannot set headers. The same verifier checks
// both. Errors are Unauthenticated (or Unavailable when the verifier's
// keys cannot be fetched).
func (s *Server) verify(r *http.Request) (string, error) {
	h := r.Header
	if h.Get("Authorization") == "" {
		if token := r.URL.Query().Get("access_token"); token != "" {
			h = http.Header{"Authorization": {"Bearer " + token}}
		}
	}
	return s.Auth.Authenticate(r.Context(), h)
}

// authenticate returns the user WithUser authenticated.
func (s *Server) authenticate(r *http.Request) (string, error) {
	owner, ok := conversation.UserFromContext(r.Context())
	if !ok {
		return "", conversation.Errorf(conversation.Unauthenticated, "no authenticated user in the request context")
	}
	return owner, nil
}

// conversationID parses the {id} path parameter.
func conversationID(r *http.Request) (uuid.UUID, error) {
	return wire.RequireID("conversationId", r.PathValue("id"))
}

// Caller returns the user the request acts for and its {id} path
// parameter: the start of every route under /v1/conversations/{id}/ and
// /v1/ai-sdk/chat/{id}/. Errors are Unauthenticated, or Invalid naming
// conversationId.
func (s *Server) Caller(r *http.Request) (owner string, id uuid.UUID, err error) {
	if owner, err = s.authenticate(r); err != nil {
		return "", uuid.Nil, err
	}
	if id, err = conversationID(r); err != nil {
		return "", uuid.Nil, err
	}
	return owner, id, nil
}

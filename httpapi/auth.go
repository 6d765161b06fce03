package httpapi

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/wire"
)

// authenticate returns the user the request acts for: from its
// Authorization header, or, when it has none, from the access_token query
// parameter, for EventSource, which cannot set headers. The same verifier
// checks both. Errors are Unauthenticated (or Unavailable when the
// verifier's keys cannot be fetched).
func (s *server) authenticate(r *http.Request) (string, error) {
	h := r.Header
	if h.Get("Authorization") == "" {
		if token := r.URL.Query().Get("access_token"); token != "" {
			h = http.Header{"Authorization": {"Bearer " + token}}
		}
	}
	return s.auth.Authenticate(r.Context(), h)
}

// conversationID parses the {id} path parameter.
func conversationID(r *http.Request) (uuid.UUID, error) {
	return wire.RequireID("conversationId", r.PathValue("id"))
}

// caller authenticates the request and parses its {id} path parameter: the
// start of every route under /v1/conversations/{id}/ and /v1/ai-sdk/chat/{id}/.
func (s *server) caller(r *http.Request) (owner string, id uuid.UUID, err error) {
	if owner, err = s.authenticate(r); err != nil {
		return "", uuid.Nil, err
	}
	if id, err = conversationID(r); err != nil {
		return "", uuid.Nil, err
	}
	return owner, id, nil
}

package httpapi

import (
	"net/http"

	"github.com/google/uuid"
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
	return parseUUID("conversationId", r.PathValue("id"))
}

// parseUUID parses a required UUID in its canonical 36-character form.
func parseUUID(field, value string) (uuid.UUID, error) {
	if value == "" {
		return uuid.Nil, invalid(field, "is required")
	}
	id, err := uuid.Parse(value)
	if err != nil || len(value) != 36 {
		if len(value) > 64 {
			value = value[:64] + "…"
		}
		return uuid.Nil, invalid(field, "%q is not a UUID", value)
	}
	return id, nil
}

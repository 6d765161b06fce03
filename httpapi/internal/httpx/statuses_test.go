package httpx

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/convo-dev/convo/conversation"
)

// TestEveryCodeHasAStatus: a domain code without an entry would be
// answered 500.
func TestEveryCodeHasAStatus(t *testing.T) {
	for _, c := range conversation.Codes {
		if _, ok := statuses[c]; !ok {
			t.Errorf("domain code %q has no HTTP status", c)
		}
	}
}

// TestOverloadedIs503: a refusal by the server's load (Overloaded) is 503
// with Retry-After and the code resource_exhausted; a caller's own limit
// stays 429.
func TestOverloadedIs503(t *testing.T) {
	s := &Server{Logger: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		overloaded bool
		status     int
	}{{true, http.StatusServiceUnavailable}, {false, http.StatusTooManyRequests}} {
		e := conversation.Errorf(conversation.ResourceExhausted, "send message: the server is overloaded")
		e.RetryAfter, e.Overloaded = 2*time.Second, tc.overloaded
		w := httptest.NewRecorder()
		s.WriteError(w, httptest.NewRequest(http.MethodPost, "/api/chat", nil), fmt.Errorf("wrapped: %w", e))
		var body errorBody
		if err := json.NewDecoder(w.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if w.Code != tc.status || w.Header().Get("Retry-After") != "2" || body.Code != "resource_exhausted" {
			t.Errorf("overloaded %v: %d, Retry-After %q, code %q; want %d, 2, resource_exhausted",
				tc.overloaded, w.Code, w.Header().Get("Retry-After"), body.Code, tc.status)
		}
	}
}

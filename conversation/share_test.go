package conversation

import "testing"

// TestRedactedPath: a share token never reaches a log or a trace through
// a request's path; every other path is kept as it is.
func TestRedactedPath(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/shares/Xy3abc":                  "/v1/shares/{token}",
		"/v1/shares/Xy3abc/events":           "/v1/shares/{token}/events",
		"/v1/shares/":                        "/v1/shares/",
		"/v1/conversations/123/events":       "/v1/conversations/123/events",
		"/v1/sharesXy3abc":                   "/v1/sharesXy3abc",
		"/convo.v1.ConversationService/Send": "/convo.v1.ConversationService/Send",
	} {
		if got := RedactedPath(path); got != want {
			t.Errorf("RedactedPath(%q) = %q, want %q", path, got, want)
		}
	}
}

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestMembersRoutes: the SSE, AG-UI, AI SDK and history routes on a
// shared conversation, as its owner (alice), a participant (pat), a
// viewer (vic), a removed member (rex), a stranger (sam), and anyone
// holding a live share link's token sent as a bearer token. Reads are
// every member's, sends the owner's and participants' (a viewer's is 403
// permission_denied naming the role); a removed member and a stranger get
// 404 not_found; a share token opens only the share's own reads, so here
// it is 401 unauthenticated. A refusal changes nothing.
func TestMembersRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.SetupAuth(t)
	var shareToken string
	shared := func(t *testing.T) uuid.UUID {
		t.Helper()
		s := tb.Send(t, "alice", uuid.Nil, "shared")
		tb.StartPrompt(t, s.PromptID)
		tb.CompletePrompt(t, s.PromptID)
		for user, role := range map[string]conversation.MemberRole{"pat": conversation.RoleParticipant, "vic": conversation.RoleViewer, "rex": conversation.RoleParticipant} {
			if _, err := tb.Store.AddMember(ctx, "alice", s.ConversationID, user, role); err != nil {
				t.Fatal(err)
			}
		}
		if err := tb.Store.RemoveMember(ctx, "alice", s.ConversationID, "rex"); err != nil {
			t.Fatal(err)
		}
		_, token, err := tb.Store.CreateShare(ctx, conversation.CreateShareParams{
			CallerID: "alice", ConversationID: s.ConversationID, Mode: conversation.ShareLive, IncludeTools: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		shareToken = token
		return s.ConversationID
	}
	jsonBody := func(v any) *bytes.Reader {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.NewReader(b)
	}
	routes := []struct {
		name, method string
		write        bool
		path         func(id uuid.UUID) string
		body         func(id uuid.UUID) *bytes.Reader
	}{
		{"SSE events", "GET", false, func(id uuid.UUID) string { return fmt.Sprintf("/v1/conversations/%s/events", id) }, nil},
		{"AG-UI follow", "GET", false, func(id uuid.UUID) string { return fmt.Sprintf("/v1/conversations/%s/agui", id) }, nil},
		{"history", "GET", false, func(id uuid.UUID) string { return fmt.Sprintf("/v1/conversations/%s/history", id) }, nil},
		{"AI SDK messages", "GET", false, func(id uuid.UUID) string { return fmt.Sprintf("/v1/ai-sdk/chat/%s/messages", id) }, nil},
		{"AI SDK send", "POST", true, func(uuid.UUID) string { return "/v1/ai-sdk/chat" }, func(id uuid.UUID) *bytes.Reader {
			return jsonBody(map[string]any{"id": id.String(), "trigger": "submit-message", "messages": []any{map[string]any{
				"id": uuid.NewString(), "role": "user", "parts": []any{map[string]any{"type": "text", "text": "hi"}}}}})
		}},
		{"AG-UI run", "POST", true, func(uuid.UUID) string { return "/v1/agui" }, func(id uuid.UUID) *bytes.Reader {
			return jsonBody(map[string]any{"threadId": id.String(), "runId": uuid.NewString(),
				"messages": []any{map[string]any{"id": uuid.NewString(), "role": "user", "content": "hi"}},
				"tools":    []any{}, "context": []any{}, "state": map[string]any{}, "forwardedProps": map[string]any{}})
		}},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			for _, user := range []string{"alice", "pat", "vic", "rex", "sam", "share token"} {
				id := shared(t)
				want, code := http.StatusOK, ""
				switch {
				case user == "share token":
					want, code = http.StatusUnauthorized, "unauthenticated"
				case user == "rex" || user == "sam":
					want, code = http.StatusNotFound, "not_found"
				case user == "vic" && r.write:
					want, code = http.StatusForbidden, "permission_denied"
				}
				before := tb.State(t, "alice", id)
				header := apitest.Bearer(apitest.TokenFor(t, user))
				if user == "share token" {
					header = apitest.Bearer(shareToken)
				}
				var body *bytes.Reader
				if r.body != nil {
					body = r.body(id)
					header.Set("Content-Type", "application/json")
				}
				var resp *http.Response
				var cancel context.CancelFunc
				if body != nil {
					resp, cancel = apitest.Do(t, r.method, tb.URL+r.path(id), header, body)
				} else {
					resp, cancel = apitest.Do(t, r.method, tb.URL+r.path(id), header, nil)
				}
				if resp.StatusCode != want {
					_, msg := apitest.ErrorBody(t, resp)
					t.Errorf("%s as %s: %s (%s), want %d", r.name, user, resp.Status, msg, want)
					cancel()
					continue
				}
				if code != "" {
					gotCode, msg := apitest.ErrorBody(t, resp)
					if gotCode != code {
						t.Errorf("%s as %s: code %s (%s), want %s", r.name, user, gotCode, msg, code)
					}
					if code == "permission_denied" && !strings.Contains(msg, "a viewer may not") {
						t.Errorf("%s as %s: %q does not name the role", r.name, user, msg)
					}
					after := tb.State(t, "alice", id)
					if after.Seq != before.Seq || len(after.Messages) != len(before.Messages) {
						t.Errorf("%s as %s was refused and changed the conversation: seq %d → %d", r.name, user, before.Seq, after.Seq)
					}
				} else {
					resp.Body.Close()
				}
				cancel()
			}
		})
	}
}

package aisdk_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestAISDKFailedReplyMetadata: /messages gives a failed reply its
// prompt's error as metadata.error, and a completed one no metadata.
func TestAISDKFailedReplyMetadata(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	header := apitest.Bearer(apitest.TokenFor(t, "alice"))
	one := tb.Send(t, "alice", uuid.Nil, "one")
	tb.StartPrompt(t, one.PromptID)
	tb.FailPrompt(t, one.PromptID, "getaddrinfo ENOTFOUND api.openai.com")
	two := tb.Send(t, "alice", one.ConversationID, "two")
	tb.StartPrompt(t, two.PromptID)
	tb.CompletePrompt(t, two.PromptID)

	byID := map[string]map[string]any{}
	for _, m := range uiMessagesOf(t, tb.URL, header, one.ConversationID.String()) {
		byID[m["id"].(string)] = m
	}
	failed := byID[one.MessageID.String()]
	if failed == nil {
		t.Fatalf("the failed reply is not among the messages %v", byID)
	}
	meta, _ := failed["metadata"].(map[string]any)
	if got := meta["error"]; got != "getaddrinfo ENOTFOUND api.openai.com" {
		t.Errorf("the failed reply's metadata %v; want error %q", failed["metadata"], "getaddrinfo ENOTFOUND api.openai.com")
	}
	for _, id := range []uuid.UUID{one.UserMessageID, two.UserMessageID, two.MessageID} {
		if m := byID[id.String()]; m == nil || m["metadata"] != nil {
			t.Errorf("message %s: %v; want it without metadata", id, m)
		}
	}
}

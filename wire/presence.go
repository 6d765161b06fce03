package wire

import (
	"github.com/google/uuid"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/presence"
)

// Presence is the StreamConversation message of a conversation's presence
// list (StreamConversationResponse.presence).
func Presence(entries []presence.Entry) *Response {
	users := make([]*convov1.PresentUser, len(entries))
	for i, e := range entries {
		users[i] = &convov1.PresentUser{UserId: e.UserID, Viewing: e.Viewing, Typing: e.Typing}
	}
	return &Response{Kind: &convov1.StreamConversationResponse_Presence{Presence: &convov1.Presence{Users: users}}}
}

// PublishPresence returns a presence.Options.Publish that offers each list
// to hub's subscribers of the conversation that asked for presence (one
// message, encoded once for them all); a conversation nobody follows on
// this server costs no message.
func PublishPresence(hub *Hub) func(uuid.UUID, []presence.Entry) {
	return func(id uuid.UUID, entries []presence.Entry) {
		if hub.Follows(id) {
			hub.Ephemeral(id, Presence(entries))
		}
	}
}

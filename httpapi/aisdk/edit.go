package aisdk

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// An edit is useChat's sendMessage({text, messageId}): the AI SDK cuts
// its chat after the message messageId names, replaces that message's
// text, and posts a submit-message whose last message is the edited one
// (same id) with messageId set. convo maps it onto EditMessage: a new
// version of that turn, the old one kept (docs/branches.md).
//
// The id alone does not always name a convo message. useChat gives a
// message it sends an id of its own, which convo never learns (a UI
// message stream cannot rename a user message), so a message sent since
// the page loaded keeps the client's id; only a message loaded from
// /messages carries convo's. The assistant messages the client holds
// always carry convo's ids (the stream's start chunk sets them). So the
// turn is found by the id when it names a user message on the active
// path, and otherwise by the message before it in the request: the edit
// replaces the user message that follows that one on the active path (or
// the path's first message when the edited one is the chat's first).

// editTarget is what an edit request maps onto.
type editTarget struct {
	// message is the convo user message to edit; uuid.Nil when the
	// edited message is not in convo at all: it follows the chat's
	// latest message (a send that never reached convo, posted again by
	// sendMessage() after an error), and is sent as a new message.
	message uuid.UUID
}

// findEditTarget finds the user message on path (the chat's active path,
// every message of it) that the edit request replaces. A request whose
// message before the edited one is not on the path (another tab switched
// or edited meanwhile, or the client's copy is stale) is
// FailedPrecondition, naming the message: the client must load the chat
// again rather than edit a turn convo no longer shows.
func findEditTarget(path []conversation.Message, req *chatRequest) (editTarget, error) {
	if id, err := uuid.Parse(req.MessageID); err == nil {
		for _, m := range path {
			if m.ID == id {
				return editTarget{message: id}, nil
			}
		}
	}
	n := len(req.Messages)
	if n == 1 {
		// The chat's first message.
		for _, m := range path {
			if m.Role == conversation.RoleUser {
				return editTarget{message: m.ID}, nil
			}
		}
		return editTarget{}, nil
	}
	prev := req.Messages[n-2].ID
	at := -1
	for i, m := range path {
		if m.ID.String() == prev {
			at = i
			break
		}
	}
	if at < 0 {
		return editTarget{}, conversation.Errorf(conversation.FailedPrecondition,
			"messages[%d]: message %q, before the edited message, is not on the chat's active path (the chat changed); "+
				"load it again (GET /v1/ai-sdk/chat/{id}/messages) and edit there", n-2, clip(prev))
	}
	for _, m := range path[at+1:] {
		if m.Role == conversation.RoleUser {
			return editTarget{message: m.ID}, nil
		}
	}
	return editTarget{}, nil
}

// clip shortens a client's string for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%s…", s[:64])
	}
	return s
}

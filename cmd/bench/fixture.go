package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// reply is a conversation whose assistant reply is streaming into a text
// block, as a worker leaves it between start_block and end_block.
type reply struct {
	conversationID uuid.UUID
	blockID        uuid.UUID
}

// benchLease is the lease the bench claims its prompts with, the longest
// claim_prompt grants (an hour): its writers never heartbeat, and a
// server's lease reaper would fail a prompt of the default 30 s lease in
// the middle of a measurement.
const benchLease = 3600

// newReply sends a user message, claims and starts its prompt (as a worker
// does) and starts a text block. Replies are made one at a time: the claim
// takes the oldest queued prompt, which must be the one just sent.
func (m *Main) newReply(ctx context.Context) (reply, error) { return m.newReplyFor(ctx, benchOwner) }

// newReplyFor is newReply in a conversation of owner.
func (m *Main) newReplyFor(ctx context.Context, owner string) (reply, error) {
	res, err := m.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: owner, Text: "bench", ModelConfigs: []json.RawMessage{json.RawMessage(`{"model":"bench"}`)},
	})
	if err != nil {
		return reply{}, err
	}
	q := apiq.New(m.writers)
	claimed, err := q.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "bench", LeaseSeconds: benchLease})
	if err != nil {
		return reply{}, fmt.Errorf("claim prompt: %w", err)
	}
	if len(claimed) != 1 || claimed[0].PromptID != res.PromptIDs[0] {
		return reply{}, fmt.Errorf("claim prompt: claimed %v, not the prompt just sent (%s): another prompt is queued", claimed, res.PromptIDs[0])
	}
	if err := q.PromptStart(ctx, res.PromptIDs[0]); err != nil {
		return reply{}, fmt.Errorf("start prompt: %w", err)
	}
	block, err := q.BlockStart(ctx, apiq.BlockStartParams{
		PromptID: res.PromptIDs[0], BlockType: "text", Metadata: json.RawMessage(`{}`),
	})
	if err != nil {
		return reply{}, fmt.Errorf("start block: %w", err)
	}
	return reply{conversationID: res.ConversationID, blockID: block}, nil
}

// newReplies makes n replies.
func (m *Main) newReplies(ctx context.Context, n int) ([]reply, error) {
	out := make([]reply, n)
	for i := range out {
		var err error
		if out[i], err = m.newReply(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deltaText is the delta with index i: the index in its first 8 bytes
// (subscribers read it back), padded to size bytes.
func deltaText(i, size int) string {
	return fmt.Sprintf("%08d", i) + strings.Repeat(".", size-8)
}

// deltaIndex reads the index back from a delta's text.
func deltaIndex(text string) (int, bool) {
	if len(text) < 8 {
		return 0, false
	}
	i, err := strconv.Atoi(text[:8])
	return i, err == nil
}

// cleanUp deletes what the bench wrote into a database it did not create,
// and restores its NOTIFY setting.
func (m *Main) cleanUp(ctx context.Context) error {
	if _, err := m.pool.Exec(ctx, deleteConversationsSQL, benchOwner); err != nil {
		return fmt.Errorf("delete the bench's conversations: %w", err)
	}
	if err := dropBaseline(ctx, m.pool); err != nil {
		return err
	}
	if m.notifyWas != nil {
		return m.setNotify(ctx, *m.notifyWas)
	}
	return nil
}

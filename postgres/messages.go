package postgres

import (
	"context"
	"encoding/json"
	"math"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// SendMessage implements conversation.Store. Concurrent calls share
// transactions (see sender): each gets its own result or error, the same
// a send alone would get, and a refused send writes nothing and fails no
// other. Past the bound of SetMaxPendingSends it refuses at once, writing
// nothing, with conversation.ResourceExhausted (Overloaded, RetryAfter
// set). A caller whose ctx ends while its send waits for a group is
// dropped, and nothing of its send is written; once the group started,
// the send may be written though the caller got ctx's error.
func (s *Store) SendMessage(ctx context.Context, p conversation.SendMessageParams) (conversation.SendMessageResult, error) {
	configs, err := json.Marshal(p.ModelConfigs)
	if err != nil {
		return conversation.SendMessageResult{}, conversation.Errorf(conversation.Invalid, "model configuration is not valid JSON")
	}
	return s.sends.send(ctx, p, string(configs))
}

// SetMaxPendingSends bounds the SendMessages that may wait to be written
// (DefaultMaxPendingSends unless set; 0: no bound). Past it SendMessage
// refuses at once: the server is writing as fast as it can, and a send
// accepted now would wait seconds more.
func (s *Store) SetMaxPendingSends(n int) error {
	if n < 0 {
		return conversation.Errorf(conversation.Invalid, "max pending sends: want 0 or more, got %d", n)
	}
	s.sends.mu.Lock()
	s.sends.maxPending = n
	s.sends.mu.Unlock()
	return nil
}

// OnPromptsQueued sets fn to be called after SendMessage queued prompts
// (once per shared transaction, after it committed, before its callers
// are answered), so that workers in this process claim them at once
// instead of waiting for the notification; nil: none. fn must not block.
func (s *Store) OnPromptsQueued(fn func()) {
	if fn == nil {
		s.sends.onQueued.Store(nil)
		return
	}
	s.sends.onQueued.Store(&fn)
}

// SendStats counts what SendMessage did since the store was made.
type SendStats struct {
	// Groups is the transactions the sends were written in, counted as
	// each starts (a group refused whole, and a send written again alone,
	// count too).
	Groups int64
	// Sent is the sends written; Overloaded the sends refused because
	// too many waited.
	Sent, Overloaded int64
	// Pending is the sends waiting for a group now.
	Pending int
}

// SendStats returns the counts of SendMessage since the store was made.
func (s *Store) SendStats() SendStats {
	s.sends.mu.Lock()
	pending := len(s.sends.queue)
	s.sends.mu.Unlock()
	return SendStats{Groups: s.sends.groups.Load(), Sent: s.sends.sent.Load(), Overloaded: s.sends.overloaded.Load(), Pending: pending}
}

// CancelPrompt implements conversation.Store.
func (s *Store) CancelPrompt(ctx context.Context, ownerID string, promptID uuid.UUID) (bool, error) {
	cancelled, err := s.q.PromptCancel(ctx, dbq.PromptCancelParams{PromptID: promptID, UserID: ownerID})
	if err != nil {
		return false, translate(err, "cancel prompt "+promptID.String())
	}
	return cancelled, nil
}

// ExpireLeases fails running prompts whose lease expired (see
// convo.expire_leases) and returns how many.
func (s *Store) ExpireLeases(ctx context.Context) (int, error) {
	n, err := s.q.PromptExpireLeases(ctx)
	if err != nil {
		return 0, translate(err, "expire leases")
	}
	return int(n), nil
}

// SetMaxActivePrompts sets the cap on prompts one owner may have queued or
// running at once, which convo.send_message enforces for every server and
// client of the database (0: no cap). SendMessage past it fails with
// conversation.ResourceExhausted and queues nothing.
func (s *Store) SetMaxActivePrompts(ctx context.Context, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return conversation.Errorf(conversation.Invalid, "max active prompts: want 0 or more, got %d", n)
	}
	if err := s.q.LimitsSetMaxActivePrompts(ctx, int32(n)); err != nil {
		return translate(err, "set max active prompts")
	}
	return nil
}

// nonNil is ids, or an empty list for none (a nil slice is SQL NULL).
func nonNil(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}

// DeleteQueuedMessage implements conversation.Store with
// convo.delete_queued_message.
func (s *Store) DeleteQueuedMessage(ctx context.Context, ownerID string, messageID uuid.UUID) (uuid.UUID, error) {
	id, err := s.q.MessageDeleteQueued(ctx, dbq.MessageDeleteQueuedParams{OwnerID: ownerID, MessageID: messageID})
	if err != nil {
		return uuid.Nil, translate(err, "delete queued message")
	}
	return id, nil
}

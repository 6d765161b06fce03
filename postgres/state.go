package postgres

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// State implements conversation.Store: four reads (five when a prompt is
// unfinished) in one repeatable-read transaction, so the conversation's
// last_seq and every row agree.
func (s *Store) State(ctx context.Context, ownerID string, conversationID uuid.UUID) (conversation.State, error) {
	return s.readState(ctx, ownerID, conversationID, 0)
}

// RecentState implements conversation.Store.
func (s *Store) RecentState(ctx context.Context, ownerID string, conversationID uuid.UUID, maxBytes int) (conversation.State, error) {
	if maxBytes <= 0 {
		return conversation.State{}, fmt.Errorf("postgres: RecentState: maxBytes must be positive, got %d", maxBytes)
	}
	return s.readState(ctx, ownerID, conversationID, maxBytes)
}

// OlderMessages implements conversation.Store.
func (s *Store) OlderMessages(ctx context.Context, ownerID string, conversationID uuid.UUID, before int64, maxBytes int) (conversation.Page, error) {
	if maxBytes <= 0 {
		return conversation.Page{}, fmt.Errorf("postgres: OlderMessages: maxBytes must be positive, got %d", maxBytes)
	}
	var page conversation.Page
	err := s.readSnapshot(ctx, func(q *dbq.Queries) error {
		if _, err := q.ConversationGet(ctx, dbq.ConversationGetParams{ID: conversationID, UserID: ownerID}); err != nil {
			return err
		}
		tail, err := q.MessageTail(ctx, tailParams(conversationID, before, maxBytes))
		if err != nil {
			return err
		}
		page.Messages, err = readMessages(ctx, q, conversationID, tail.FromPosition, before)
		page.Older = tail.Older
		return err
	})
	if err != nil {
		return conversation.Page{}, translate(err, "read messages of conversation "+conversationID.String())
	}
	return page, nil
}

// readState reads the conversation in one snapshot: every message, or with
// maxBytes > 0 the latest that fit (see RecentState).
func (s *Store) readState(ctx context.Context, ownerID string, conversationID uuid.UUID, maxBytes int) (conversation.State, error) {
	var st conversation.State
	err := s.readSnapshot(ctx, func(q *dbq.Queries) error {
		row, err := q.ConversationGet(ctx, dbq.ConversationGetParams{ID: conversationID, UserID: ownerID})
		if err != nil {
			return err
		}
		conv := row.ConvoConversation
		from := int64(0)
		if maxBytes > 0 {
			tail, err := q.MessageTail(ctx, tailParams(conversationID, math.MaxInt64, maxBytes))
			if err != nil {
				return err
			}
			from, st.Older = tail.FromPosition, tail.Older
		}
		st.Conversation, st.Seq = conversationFromRow(conv), conv.LastSeq
		st.Conversation.Role = conversation.MemberRole(row.Role)
		if st.Messages, err = readMessages(ctx, q, conversationID, from, math.MaxInt64); err != nil {
			return err
		}
		// Open input requests belong to unfinished prompts, and a
		// conversation with one has an active prompt (the newest
		// unfinished one): most snapshots skip the read. In the same
		// snapshot, so that they agree with st.Seq.
		if !conv.ActivePromptID.Valid {
			return nil
		}
		// They count in the same budget: what the messages left of it.
		// Past it an answered request comes without its answer (a
		// client tool's output may be 100,000 characters, and a reply
		// may have many): the client still knows it was answered, and
		// the answer reaches it as the tool call's output.
		inputBytes := int64(-1)
		if maxBytes > 0 {
			inputBytes = max(int64(maxBytes)-messagesBytes(st.Messages), 0)
		}
		open, err := q.InputRequestListOpen(ctx, dbq.InputRequestListOpenParams{ConversationID: conversationID, MaxBytes: inputBytes})
		for _, r := range open {
			st.PendingInputs = append(st.PendingInputs, inputRequestFromRow(r))
		}
		return err
	})
	if err != nil {
		return conversation.State{}, translate(err, "read conversation "+conversationID.String())
	}
	return st, nil
}

// messagesBytes is the size of messages as convo._message_tail counts
// it: each message's blocks' text, metadata and tool calls, and a failed
// one's error, plus 256 bytes.
func messagesBytes(messages []conversation.Message) int64 {
	var n int64
	for _, m := range messages {
		n += 256 + int64(len(m.Error))
		for _, b := range m.Blocks {
			n += int64(len(b.Content) + len(b.Metadata))
			if tc := b.ToolCall; tc != nil {
				n += int64(len(tc.Input) + len(tc.Output) + len(tc.Error))
			}
		}
	}
	return n
}

// tailParams asks where the latest messages before position before that
// fit in maxBytes begin.
func tailParams(conversationID uuid.UUID, before int64, maxBytes int) dbq.MessageTailParams {
	return dbq.MessageTailParams{
		ConversationID: conversationID, BeforePosition: before,
		MaxBytes: int64(maxBytes),
	}
}

// readMessages reads the messages at positions from up to (not including)
// before, with their blocks and tool calls.
func readMessages(ctx context.Context, q *dbq.Queries, conversationID uuid.UUID, from, before int64) ([]conversation.Message, error) {
	messages, err := q.MessageListByConversation(ctx, dbq.MessageListByConversationParams{
		ConversationID: conversationID, FromPosition: from, BeforePosition: before,
	})
	if err != nil {
		return nil, err
	}
	blocks, err := q.BlockListByConversation(ctx, dbq.BlockListByConversationParams{
		ConversationID: conversationID, FromPosition: from, BeforePosition: before,
	})
	if err != nil {
		return nil, err
	}
	calls, err := q.ToolCallListByConversation(ctx, dbq.ToolCallListByConversationParams{
		ConversationID: conversationID, FromPosition: from, BeforePosition: before,
	})
	if err != nil {
		return nil, err
	}
	return assembleMessages(messages, blocks, calls), nil
}

// assembleMessages puts each message's blocks, and each block's tool call,
// in place.
func assembleMessages(
	messages []dbq.MessageListByConversationRow,
	blocks []dbq.BlockListByConversationRow,
	calls []dbq.ToolCallListByConversationRow,
) []conversation.Message {
	return indexParts(len(messages), blocks, calls).assemble(messages, false)
}

// messageParts are blocks, each with its tool call, by message: what
// assemble puts in place.
type messageParts struct {
	blocksByMessage map[uuid.UUID][]conversation.Block
}

// indexParts indexes blocks, with calls, by message (about messages of
// them).
func indexParts(messages int, blocks []dbq.BlockListByConversationRow, calls []dbq.ToolCallListByConversationRow) messageParts {
	callByBlock := make(map[uuid.UUID]*conversation.ToolCall, len(calls))
	for _, c := range calls {
		tc := &conversation.ToolCall{
			ID: c.ID, BlockID: c.BlockID, Name: c.Name, Input: c.Input,
			Status: conversation.ToolCallStatus(c.Status), Output: c.Output,
			StartedAt: c.StartedAt, EndedAt: c.EndedAt,
		}
		if c.Error != nil {
			tc.Error = *c.Error
		}
		callByBlock[c.BlockID] = tc
	}
	blocksByMessage := make(map[uuid.UUID][]conversation.Block, messages)
	for _, b := range blocks {
		blocksByMessage[b.MessageID] = append(blocksByMessage[b.MessageID], conversation.Block{
			ID: b.ID, MessageID: b.MessageID, PromptID: b.PromptID, Type: b.BlockType,
			Status: conversation.BlockStatus(b.Status), Position: int(b.Position), Content: b.Content, Metadata: b.Metadata,
			ToolCall: callByBlock[b.ID], CreatedAt: b.CreatedAt, EndedAt: b.EndedAt,
		})
	}
	return messageParts{blocksByMessage: blocksByMessage}
}

// assemble returns messages with their blocks in place. With shared (the
// parts serve more than one state) each message gets its own copy of its
// blocks and their tool calls, so that no two states share what a caller
// may change.
func (p messageParts) assemble(messages []dbq.MessageListByConversationRow, shared bool) []conversation.Message {
	out := make([]conversation.Message, 0, len(messages))
	for _, row := range messages {
		m := messageFromRow(row)
		m.Blocks = p.blocksByMessage[m.ID]
		if shared && m.Blocks != nil {
			m.Blocks = slices.Clone(m.Blocks)
			for i := range m.Blocks {
				if tc := m.Blocks[i].ToolCall; tc != nil {
					c := *tc
					m.Blocks[i].ToolCall = &c
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// messageFromRow converts a message row (without its blocks).
func messageFromRow(m dbq.MessageListByConversationRow) conversation.Message {
	msg := conversation.Message{
		ID: m.ID, ConversationID: m.ConversationID, Role: conversation.Role(m.Role),
		SenderID: deref(m.SenderID), Status: conversation.MessageStatus(m.Status), Position: m.Position, PromptID: m.PromptID,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, ComparisonID: m.ComparisonID,
		ParentID: m.ParentID, SiblingCount: int(m.SiblingCount), SiblingIndex: int(m.SiblingIndex),
		Error: m.PromptError, Queued: m.Queued,
	}
	if m.FeedbackRating != nil && m.FeedbackAt != nil {
		msg.Feedback = &conversation.Feedback{
			Rating: conversation.Rating(*m.FeedbackRating), Comment: m.FeedbackComment, CreatedAt: *m.FeedbackAt,
		}
	}
	if m.ComparisonSlot != nil {
		msg.ComparisonSlot = *m.ComparisonSlot
	}
	return msg
}

// deref is *s, or "" for nil (a NULL column).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func conversationFromRow(c dbq.ConvoConversation) conversation.Conversation {
	conv := conversation.Conversation{
		ID: c.ID, OwnerID: c.OwnerID, Title: c.Title, ActivePromptID: c.ActivePromptID,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, LastMessageAt: c.LastMessageAt,
		LastSeq: c.LastSeq,
	}
	if c.SendPolicy != nil {
		conv.SendPolicy = conversation.SendPolicy(*c.SendPolicy)
	}
	return conv
}

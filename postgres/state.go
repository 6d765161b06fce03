package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// State implements conversation.Store: four reads in one repeatable-read
// transaction, so the conversation's last_seq and every row agree.
func (s *Store) State(ctx context.Context, ownerID string, conversationID uuid.UUID) (conversation.State, error) {
	var st conversation.State
	err := s.readSnapshot(ctx, func(q *dbq.Queries) error {
		conv, err := q.ConversationGet(ctx, dbq.ConversationGetParams{ID: conversationID, OwnerID: ownerID})
		if err != nil {
			return err
		}
		messages, err := q.MessageListByConversation(ctx, conversationID)
		if err != nil {
			return err
		}
		blocks, err := q.BlockListByConversation(ctx, conversationID)
		if err != nil {
			return err
		}
		calls, err := q.ToolCallListByConversation(ctx, conversationID)
		if err != nil {
			return err
		}
		st = assembleState(conv, messages, blocks, calls)
		return nil
	})
	if err != nil {
		return conversation.State{}, translate(err, "read conversation "+conversationID.String())
	}
	return st, nil
}

func assembleState(
	conv dbq.ConvoConversation,
	messages []dbq.MessageListByConversationRow,
	blocks []dbq.BlockListByConversationRow,
	calls []dbq.ToolCallListByConversationRow,
) conversation.State {
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
	blocksByMessage := make(map[uuid.UUID][]conversation.Block, len(messages))
	for _, b := range blocks {
		blocksByMessage[b.MessageID] = append(blocksByMessage[b.MessageID], conversation.Block{
			ID: b.ID, MessageID: b.MessageID, PromptID: b.PromptID, Type: b.BlockType,
			Status: conversation.BlockStatus(b.Status), Position: int(b.Position), Content: b.Content, Metadata: b.Metadata,
			ToolCall: callByBlock[b.ID], CreatedAt: b.CreatedAt, EndedAt: b.EndedAt,
		})
	}
	st := conversation.State{Conversation: conversationFromRow(conv), Seq: conv.LastSeq}
	st.Messages = make([]conversation.Message, 0, len(messages))
	for _, row := range messages {
		m := messageFromRow(row)
		m.Blocks = blocksByMessage[m.ID]
		st.Messages = append(st.Messages, m)
	}
	return st
}

// messageFromRow converts a message row (without its blocks).
func messageFromRow(m dbq.MessageListByConversationRow) conversation.Message {
	msg := conversation.Message{
		ID: m.ID, ConversationID: m.ConversationID, Role: conversation.Role(m.Role),
		Status: conversation.MessageStatus(m.Status), PromptID: m.PromptID,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, ComparisonID: m.ComparisonID,
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

func conversationFromRow(c dbq.ConvoConversation) conversation.Conversation {
	return conversation.Conversation{
		ID: c.ID, OwnerID: c.OwnerID, Title: c.Title, ActivePromptID: c.ActivePromptID,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, LastMessageAt: c.LastMessageAt,
		LastSeq: c.LastSeq,
	}
}

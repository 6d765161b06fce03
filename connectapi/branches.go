package connectapi

import (
	"context"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// The versions of a conversation's turns (docs/branches.md). Each RPC is
// one SQL function; the stream carries the change as a branchSwitched
// event to clients that ask (StreamConversationRequest.include_branches).

func (s *service) EditMessage(ctx context.Context, req *connect.Request[convov1.EditMessageRequest]) (*connect.Response[convov1.EditMessageResponse], error) {
	owner, conversationID, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	m := req.Msg
	messageID, err := wire.RequireID("messageId", m.GetMessageId())
	if err != nil {
		return nil, err
	}
	fileIDs, err := wire.UserMessage("text", m.GetText(), "fileIds", m.GetFileIds(), s.maxFiles)
	if err != nil {
		return nil, err
	}
	config, err := optionalModelConfig("model", m.GetModel())
	if err != nil {
		return nil, err
	}
	res, err := s.store.EditMessage(ctx, conversation.EditParams{
		OwnerID: owner, ConversationID: conversationID, MessageID: messageID, Text: m.GetText(), ModelConfig: config,
		FileIDs: fileIDs,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.EditMessageResponse{
		UserMessageId: res.UserMessageID.String(), AssistantMessageId: res.AssistantMessageID.String(),
		PromptId: res.PromptID.String(),
	}), nil
}

func (s *service) RegenerateReply(ctx context.Context, req *connect.Request[convov1.RegenerateReplyRequest]) (*connect.Response[convov1.RegenerateReplyResponse], error) {
	owner, conversationID, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	m := req.Msg
	messageID, err := wire.OptionalID("messageId", m.GetMessageId())
	if err != nil {
		return nil, err
	}
	config, err := optionalModelConfig("model", m.GetModel())
	if err != nil {
		return nil, err
	}
	res, err := s.store.RegenerateReply(ctx, conversation.RegenerateParams{
		OwnerID: owner, ConversationID: conversationID, MessageID: messageID, ModelConfig: config,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.RegenerateReplyResponse{
		AssistantMessageId: res.MessageID.String(), PromptId: res.PromptID.String(),
	}), nil
}

func (s *service) SwitchBranch(ctx context.Context, req *connect.Request[convov1.SwitchBranchRequest]) (*connect.Response[convov1.SwitchBranchResponse], error) {
	owner, conversationID, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	messageID, err := wire.RequireID("messageId", req.Msg.GetMessageId())
	if err != nil {
		return nil, err
	}
	var leaf uuid.UUID
	if req.Msg.SiblingIndex != nil {
		// A step to another version of the turn ("‹ n / m ›"), by its place.
		if i := req.Msg.GetSiblingIndex(); i < 0 {
			return nil, wire.Invalid("siblingIndex", "must not be negative (got %d)", i)
		}
		leaf, err = s.store.SwitchVersion(ctx, owner, conversationID, messageID, int(req.Msg.GetSiblingIndex()))
	} else {
		leaf, err = s.store.SwitchBranch(ctx, owner, conversationID, messageID)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.SwitchBranchResponse{LeafMessageId: leaf.String()}), nil
}

// optionalModelConfig is cfg as ModelConfigJSON checks and encodes it, or
// nil when unset: the SQL function then takes the old version's.
func optionalModelConfig(field string, cfg *convov1.ModelConfig) ([]byte, error) {
	if cfg == nil {
		return nil, nil
	}
	return wire.ModelConfigJSON(field, cfg)
}

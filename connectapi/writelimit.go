package connectapi

import (
	"context"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/limit"
)

// writeProcedures are the RPCs that take a write token (Options.Writes).
// CancelPrompt, DeleteQueuedMessage and RevokeShare are left out on
// purpose: stopping a reply, taking back a message before its reply
// starts, or ending a share link must always work.
var writeProcedures = map[string]bool{
	convov1connect.ConversationServiceSendMessageProcedure:        true,
	convov1connect.ConversationServiceCreateConversationProcedure: true,
	convov1connect.ConversationServiceRenameConversationProcedure: true,
	convov1connect.ConversationServiceClearConversationProcedure:  true,
	convov1connect.ConversationServiceDeleteConversationProcedure: true,
	convov1connect.ConversationServiceSubmitFeedbackProcedure:     true,
	convov1connect.ConversationServiceVoteComparisonProcedure:     true,
	convov1connect.ConversationServiceAnswerInputProcedure:        true,
	convov1connect.ConversationServiceClaimInputProcedure:         true,
	convov1connect.ConversationServiceEditMessageProcedure:        true,
	convov1connect.ConversationServiceRegenerateReplyProcedure:    true,
	convov1connect.ConversationServiceSwitchBranchProcedure:       true,
	convov1connect.ConversationServiceSetSendPolicyProcedure:      true,
	convov1connect.ConversationServiceAddMemberProcedure:          true,
	convov1connect.ConversationServiceRemoveMemberProcedure:       true,
	convov1connect.ConversationServiceCreateShareProcedure:        true,
	convov1connect.ConversationServiceForkShareProcedure:          true,
}

// writeLimiter takes one write token of the authenticated user for each
// write RPC. It runs after authentication; a refusal is ResourceExhausted
// with a Retry-After header in seconds, and the RPC does not run.
type writeLimiter struct {
	writes *limit.Writes
}

func (l writeLimiter) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if writeProcedures[req.Spec().Procedure] {
			owner, err := user(ctx)
			if err != nil {
				return nil, err
			}
			if err := l.writes.Allow(owner); err != nil {
				return nil, err
			}
		}
		return next(ctx, req)
	}
}

func (l writeLimiter) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l writeLimiter) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

package connectapi

import (
	"context"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// AnswerInput answers a pending input request (docs/api.md).
func (s *service) AnswerInput(ctx context.Context, req *connect.Request[convov1.AnswerInputRequest]) (*connect.Response[convov1.AnswerInputResponse], error) {
	owner, id, err := userAndID(ctx, "toolCallId", req.Msg.GetToolCallId())
	if err != nil {
		return nil, err
	}
	answer, err := wire.InputAnswerJSON("answer", req.Msg.GetAnswer())
	if err != nil {
		return nil, err
	}
	r, err := s.store.AnswerInput(ctx, conversation.AnswerInputParams{OwnerID: owner, ToolCallID: id, Answer: answer})
	if err != nil {
		return nil, err
	}
	pr, err := wire.InputRequest(r)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.AnswerInputResponse{InputRequest: pr}), nil
}

// ClaimInput claims a client tool's run for one client (docs/api.md).
func (s *service) ClaimInput(ctx context.Context, req *connect.Request[convov1.ClaimInputRequest]) (*connect.Response[convov1.ClaimInputResponse], error) {
	owner, id, err := userAndID(ctx, "toolCallId", req.Msg.GetToolCallId())
	if err != nil {
		return nil, err
	}
	if err := wire.CheckClaimant("claimant", req.Msg.GetClaimant()); err != nil {
		return nil, err
	}
	lease, err := wire.ClaimLease("leaseSeconds", req.Msg.GetLeaseSeconds())
	if err != nil {
		return nil, err
	}
	r, err := s.store.ClaimInput(ctx, conversation.ClaimInputParams{
		OwnerID: owner, ToolCallID: id, Claimant: req.Msg.GetClaimant(), Lease: lease,
	})
	if err != nil {
		return nil, err
	}
	pr, err := wire.InputRequest(r)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.ClaimInputResponse{InputRequest: pr}), nil
}

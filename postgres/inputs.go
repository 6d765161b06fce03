package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// AnswerInput implements conversation.Store with convo.answer_input.
func (s *Store) AnswerInput(ctx context.Context, p conversation.AnswerInputParams) (conversation.InputRequest, error) {
	raw, err := s.q.InputAnswer(ctx, dbq.InputAnswerParams{OwnerID: p.OwnerID, ToolCallID: p.ToolCallID, Answer: p.Answer})
	if err != nil {
		return conversation.InputRequest{}, translate(err, "answer input request "+p.ToolCallID.String())
	}
	return decodeInputRequest(raw)
}

// ClaimInput implements conversation.Store with convo.claim_input.
func (s *Store) ClaimInput(ctx context.Context, p conversation.ClaimInputParams) (conversation.InputRequest, error) {
	secs := p.Lease.Seconds()
	if secs < 1 || secs > math.MaxInt32 || secs != math.Trunc(secs) {
		return conversation.InputRequest{}, conversation.Errorf(conversation.Invalid, "claim input: lease must be whole seconds, at least 1, got %s", p.Lease)
	}
	raw, err := s.q.InputClaim(ctx, dbq.InputClaimParams{
		OwnerID: p.OwnerID, ToolCallID: p.ToolCallID, Claimant: p.Claimant, LeaseSeconds: int32(secs),
	})
	if err != nil {
		return conversation.InputRequest{}, translate(err, "claim input request "+p.ToolCallID.String())
	}
	return decodeInputRequest(raw)
}

// decodeInputRequest reads a request in convo._input_request_json's form.
func decodeInputRequest(raw json.RawMessage) (conversation.InputRequest, error) {
	var r conversation.InputRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return conversation.InputRequest{}, fmt.Errorf("decode input request: %w", err)
	}
	return r, nil
}

// inputRequestFromRow converts a row of convo.input_requests.
func inputRequestFromRow(r dbq.ConvoInputRequest) conversation.InputRequest {
	out := conversation.InputRequest{
		ToolCallID: r.ToolCallID, PromptID: r.PromptID, ConversationID: r.ConversationID,
		Kind: conversation.InputKind(r.Kind), Request: r.Request, Status: conversation.InputStatus(r.Status),
		Answer: r.Answer, AnsweredAt: r.AnsweredAt, ExpiresAt: r.ExpiresAt,
		ClaimExpiresAt: r.ClaimExpiresAt, CreatedAt: r.CreatedAt,
	}
	if r.ClaimedBy != nil {
		out.ClaimedBy = *r.ClaimedBy
	}
	return out
}

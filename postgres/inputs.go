package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/jsonlimit"
	"github.com/convo-dev/convo/internal/jsonschema"
	"github.com/convo-dev/convo/postgres/dbq"
)

// AnswerInput implements conversation.Store with convo.answer_input.
func (s *Store) AnswerInput(ctx context.Context, p conversation.AnswerInputParams) (conversation.InputRequest, error) {
	if err := s.checkOutput(ctx, p); err != nil {
		return conversation.InputRequest{}, err
	}
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

// inputRequestFromRow converts an open input request (its answer nil
// when the snapshot's budget left it out).
func inputRequestFromRow(r dbq.InputRequestListOpenRow) conversation.InputRequest {
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

// checkOutput checks a client tool's output against the output schema
// of its request, if it has one, cheapest check first (convo.answer_input
// checks only the schema's top-level type; the whole schema is checked
// here, before it):
//
//  1. one read of the request (InputAnswerable): a request that is not
//     the owner's, or that can no longer be answered (answered, expired,
//     cancelled), is left to convo.answer_input, which refuses it
//     without any output being validated, however expensive its schema;
//  2. the schema is compiled within the declaration budget
//     (jsonschema.Declare), whose cost does not depend on the output;
//  3. the output is validated with ctx, within the validation's budget:
//     jsonschema.Validate first applies jsonlimit's rule (numbers within
//     float64's range, nesting at most jsonlimit.MaxDepth) in one pass,
//     refused here as "answer.output: $[0]: …". This is the store's one
//     check of the rule, for every caller (the doors checked it already,
//     with wire.InputAnswerJSON; convo.answer_input checks it last).
//
// A schema that does not compile or is over the declaration budget (one
// stored before the budget) cannot hold the output: it is logged and
// skipped, and the top-level type check of convo.answer_input still
// applies. Any other answer is left to convo.answer_input.
func (s *Store) checkOutput(ctx context.Context, p conversation.AnswerInputParams) error {
	var answer struct {
		Output *string `json:"output"`
	}
	if json.Unmarshal(p.Answer, &answer) != nil || answer.Output == nil {
		return nil
	}
	row, err := s.q.InputAnswerable(ctx, dbq.InputAnswerableParams{ToolCallID: p.ToolCallID, UserID: p.OwnerID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return translate(err, "read input request "+p.ToolCallID.String())
	}
	if !row.Answerable || row.OutputSchema == nil {
		return nil
	}
	output := []byte(*answer.Output)
	schema, err := jsonschema.Declare("output:"+p.ToolCallID.String(), row.OutputSchema)
	if err != nil {
		slog.WarnContext(ctx, "input request's output schema is not checked: it does not compile within the declaration budget",
			"tool_call_id", p.ToolCallID, "err", err)
		return nil
	}
	if err := jsonschema.Validate(ctx, schema, output); err != nil {
		if ctx.Err() != nil {
			return err
		}
		if refused, ok := errors.AsType[*jsonlimit.Error](err); ok {
			// Validate applies the rule before the schema sees a number.
			return conversation.Errorf(conversation.Invalid, "answer.output: %v", refused)
		}
		return conversation.Errorf(conversation.Invalid, "answer.output: does not match the client tool's output schema: %v", err)
	}
	return nil
}

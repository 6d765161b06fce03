package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/conversation"
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
// of its request, if it has one: the output must be JSON, of the schema.
// (convo.answer_input checks only the schema's top-level type; the whole
// schema is checked here, before it.) Any other answer, or a request
// that is not the owner's, is left to convo.answer_input.
func (s *Store) checkOutput(ctx context.Context, p conversation.AnswerInputParams) error {
	var answer struct {
		Output *string `json:"output"`
	}
	if json.Unmarshal(p.Answer, &answer) != nil || answer.Output == nil {
		return nil
	}
	raw, err := s.q.InputOutputSchema(ctx, dbq.InputOutputSchemaParams{ToolCallID: p.ToolCallID, OwnerID: p.OwnerID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return translate(err, "read the output schema of input request "+p.ToolCallID.String())
	}
	doc, err := jsonschema.Decode(raw)
	if err != nil {
		return fmt.Errorf("decode the output schema of input request %s: %w", p.ToolCallID, err)
	}
	schema, err := jsonschema.Compile("output:"+p.ToolCallID.String(), doc)
	if err != nil {
		// The worker asked with a schema that does not compile: the
		// output cannot be held to it, and the top-level type check of
		// convo.answer_input still applies.
		return nil
	}
	if err := jsonschema.Validate(schema, []byte(*answer.Output)); err != nil {
		return conversation.Errorf(conversation.Invalid, "answer.output: does not match the client tool's output schema: %v", err)
	}
	return nil
}

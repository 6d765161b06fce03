package httpx

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

// Answer is one answer to an input request, as a protocol read it from
// its request body (an AG-UI tool message or resume entry, an AI SDK tool
// part).
type Answer struct {
	// Field names the answer in errors ("resume[0]", "messages[2].parts[1]").
	Field string
	// ToolCallID is the tool call whose request it answers.
	ToolCallID uuid.UUID
	// Read is the answer to a request of kind: Invalid, naming the field,
	// when it does not fit that kind.
	Read func(kind conversation.InputKind) (*convov1.InputAnswer, error)
}

// AnswerInputs is every protocol's one way of answering input requests:
// it gives answers to the owner's requests that are pending among open
// (a conversation's PendingInputs: the requests of its unfinished
// prompts' open tool calls), all or nothing, and returns the requests it
// answered, in the answers' order.
//
// Each answer to an open request is read and checked (Answer.Read, then
// convo's rules for answers) before any is recorded: one refused refuses
// them all, naming its field, with nothing recorded. An answer to a
// request open but no longer pending (the first answer won, it expired,
// it was cancelled) is skipped, as is one to a tool call with no open
// request. When no answer is left to give, the error is the store's
// reason for the first answer whose request is open but not pending
// (FailedPrecondition, changing nothing), or else none(first), the
// protocol's own refusal of answers that name nothing open; answers is
// never empty.
func (s *Server) AnswerInputs(ctx context.Context, owner string, open []conversation.InputRequest, answers []Answer,
	none func(first Answer) error) ([]conversation.InputRequest, error) {
	requests := map[uuid.UUID]conversation.InputRequest{}
	for _, req := range open {
		requests[req.ToolCallID] = req
	}
	var given []conversation.AnswerInputParams
	var answered []conversation.InputRequest
	var stale *conversation.AnswerInputParams // the first answer to a request open but not pending
	for _, a := range answers {
		req, ok := requests[a.ToolCallID]
		if !ok {
			continue
		}
		pa, err := a.Read(req.Kind)
		if err != nil {
			return nil, err
		}
		answerJSON, err := wire.InputAnswerJSON(a.Field, pa)
		if err != nil {
			return nil, err
		}
		p := conversation.AnswerInputParams{OwnerID: owner, ToolCallID: req.ToolCallID, Answer: answerJSON, Field: a.Field}
		if req.Status != conversation.InputPending {
			if stale == nil {
				stale = &p
			}
			continue
		}
		given = append(given, p)
		answered = append(answered, req)
	}
	if len(given) == 0 {
		if stale == nil {
			return nil, none(answers[0])
		}
		// Not pending: the store says why, changing nothing.
		if _, err := s.Store.AnswerInput(ctx, *stale); err != nil {
			return nil, err
		}
		return nil, conversation.Errorf(conversation.FailedPrecondition, "%s: the request is not pending", stale.Field)
	}
	if _, err := s.Store.AnswerInputs(ctx, given); err != nil {
		return nil, err
	}
	return answered, nil
}

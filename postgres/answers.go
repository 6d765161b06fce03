package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// AnswerInputs implements conversation.Store: every output is checked
// against its schema first (as AnswerInput does), then every answer is
// given with convo.answer_input in one transaction, so that a refused one
// rolls back those before it (their events and notifications too: both
// are part of the transaction). The answers should be of one
// conversation: answer_input locks each answer's conversation in turn,
// and two calls locking two conversations in opposite orders would wait
// for each other until PostgreSQL ends one (a deadlock, Internal).
func (s *Store) AnswerInputs(ctx context.Context, ps []conversation.AnswerInputParams) ([]conversation.InputRequest, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	for _, p := range ps {
		if err := s.checkOutput(ctx, p); err != nil {
			return nil, answerRefused(p, err)
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, translate(err, "begin answering input requests")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	q := s.q.WithTx(tx)
	out := make([]conversation.InputRequest, 0, len(ps))
	for _, p := range ps {
		raw, err := q.InputAnswer(ctx, dbq.InputAnswerParams{OwnerID: p.OwnerID, ToolCallID: p.ToolCallID, Answer: p.Answer})
		if err != nil {
			return nil, answerRefused(p, translate(err, "answer input request "+p.ToolCallID.String()))
		}
		r, err := decodeInputRequest(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, translate(err, "commit the answers to input requests")
	}
	return out, nil
}

// answerRefused names p (its Field) in err's message, when err is one
// shown to the caller (a *conversation.Error) and p has a Field.
func answerRefused(p conversation.AnswerInputParams, err error) error {
	var e *conversation.Error
	if p.Field == "" || !errors.As(err, &e) {
		return err
	}
	return &conversation.Error{Code: e.Code, Message: fmt.Sprintf("%s: %s", p.Field, e.Message), RetryAfter: e.RetryAfter}
}

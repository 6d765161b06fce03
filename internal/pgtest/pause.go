package pgtest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the helpers below run their SQL on: a pool, a connection or
// a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PauseForApproval plays a worker that pauses: it claims the one queued
// prompt as worker, starts it, writes a tool_use block whose tool call
// (send_mail) asks for approval, and waits. It returns the prompt's and
// the tool call's ids.
func PauseForApproval(ctx context.Context, db DB, worker string) (promptID, toolCallID string, err error) {
	return PauseForInput(ctx, db, worker, "approval", "{}")
}

// PauseForInput pauses as PauseForApproval does, for a request of kind
// (approval, client_tool or question) asking request (a JSON object of
// the kind's shape, see convo.request_input).
func PauseForInput(ctx context.Context, db DB, worker, kind, request string) (promptID, toolCallID string, err error) {
	if err := db.QueryRow(ctx, `SELECT prompt_id::text FROM convo.claim_prompt($1, 30)`, worker).Scan(&promptID); err != nil {
		return "", "", fmt.Errorf("claim: %w", err)
	}
	err = db.QueryRow(ctx, `
		WITH started AS (SELECT convo.start_prompt($1::uuid)),
		     block AS (SELECT convo.start_block($1::uuid, 'tool_use') AS id FROM started)
		SELECT convo.start_tool_call(block.id, 'send_mail', '{"to": "a@example.com"}')::text FROM block`,
		promptID).Scan(&toolCallID)
	if err != nil {
		return "", "", fmt.Errorf("start the tool call: %w", err)
	}
	if _, err := db.Exec(ctx, `
		SELECT convo.request_input($1::uuid, $2, $3::jsonb),
		       convo.end_block((SELECT block_id FROM convo.tool_calls WHERE id = $1::uuid))`, toolCallID, kind, request); err != nil {
		return "", "", fmt.Errorf("request %s: %w", kind, err)
	}
	if _, err := db.Exec(ctx, `SELECT convo.wait_prompt($1::uuid, $2)`, promptID, worker); err != nil {
		return "", "", fmt.Errorf("wait: %w", err)
	}
	return promptID, toolCallID, nil
}

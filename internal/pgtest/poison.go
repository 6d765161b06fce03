package pgtest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Values that break convo's rule for JSON (internal/jsonlimit) and that a
// database written before the SQL functions applied it (convo._json_check)
// may hold: jsonb stores them all.
const (
	// PoisonNumber overflows a 64-bit float.
	PoisonNumber = `{"expression": 1e400}`
	// PoisonTiny is a non-zero number that rounds to zero.
	PoisonTiny = `{"n": 1e-400}`
)

// PoisonDeep is a JSON object whose member "deep" nests depth arrays.
func PoisonDeep(depth int) string {
	return `{"deep": ` + strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) + `}`
}

// Poison rewrites the stored JSON of a block as an old database may hold
// it: with UPDATE, under the functions' checks. A non-empty metadata
// becomes the block's metadata and the metadata its blockStart and
// blockEnd events carry; a non-empty input becomes its tool call's input
// and the input its tool call's events carry. Run it in the transaction
// that wrote the block (before the commit that notifies the event) to
// poison a live event as well.
func Poison(ctx context.Context, db DB, blockID, metadata, input string) error {
	if metadata != "" {
		if _, err := db.Exec(ctx, `
			WITH b AS (UPDATE convo.blocks SET metadata = $2::jsonb WHERE id = $1::uuid RETURNING id)
			UPDATE convo.events e SET payload = jsonb_set(e.payload, '{metadata}', $2::jsonb)
			  FROM b WHERE e.block_id = b.id AND e.kind IN ('blockStart', 'blockEnd')`, blockID, metadata); err != nil {
			return fmt.Errorf("poison the metadata of block %s: %w", blockID, err)
		}
	}
	if input != "" {
		for _, sql := range []string{
			`UPDATE convo.tool_calls SET input = $2::jsonb WHERE block_id = $1::uuid`,
			`UPDATE convo.events SET payload = jsonb_set(payload, '{input}', $2::jsonb)
			  WHERE block_id = $1::uuid AND tool_call_id IS NOT NULL AND payload ? 'input'`,
			`UPDATE convo.events SET payload = jsonb_set(payload, '{toolCall,input}', $2::jsonb)
			  WHERE block_id = $1::uuid AND tool_call_id IS NOT NULL AND payload ? 'toolCall'`,
		} {
			if _, err := db.Exec(ctx, sql, blockID, input); err != nil {
				return fmt.Errorf("poison the tool call input of block %s: %w", blockID, err)
			}
		}
	}
	return nil
}

// The texts of the blocks WritePoisonedReply writes, which a reader must
// still show.
const (
	PoisonedText = "the metadata of this block overflows"
	PoisonedDeep = "the metadata of this block nests 12,000 deep"
)

// WritePoisonedReply plays a worker that writes the queued prompt's reply
// and completes it, and then poisons it (Poison) as an old database may
// hold it: a text block whose metadata holds 1e400 and 1e-400, a tool
// call (calc) whose input is PoisonNumber, and a text block whose
// metadata nests 12,000 deep (PoisonDeep). It returns the blocks' ids in
// that order.
func WritePoisonedReply(ctx context.Context, db DB, promptID string) (blocks []string, err error) {
	var text, tool, deep string
	err = db.QueryRow(ctx, `
		WITH started AS (SELECT convo.start_prompt($1::uuid)),
		     text AS (SELECT convo.start_block($1::uuid, 'text', '{"n": 1}') AS id FROM started),
		     text_done AS (SELECT convo.append_block(text.id, $2), convo.end_block(text.id) FROM text)
		SELECT id::text FROM text, text_done`, promptID, PoisonedText).Scan(&text)
	if err != nil {
		return nil, fmt.Errorf("write the text block: %w", err)
	}
	err = db.QueryRow(ctx, `
		WITH tool AS (SELECT convo.start_block($1::uuid, 'tool_use', '{"name": "calc"}') AS id),
		     call AS (SELECT convo.start_tool_call(tool.id, 'calc', '{"expression": 1}') AS id FROM tool),
		     done AS (SELECT convo.complete_tool_call(call.id, '42'), convo.end_block(tool.id) FROM call, tool)
		SELECT tool.id::text FROM tool, done`, promptID).Scan(&tool)
	if err != nil {
		return nil, fmt.Errorf("write the tool call: %w", err)
	}
	err = db.QueryRow(ctx, `
		WITH deep AS (SELECT convo.start_block($1::uuid, 'text', '{}') AS id),
		     done AS (SELECT convo.append_block(deep.id, $2), convo.end_block(deep.id) FROM deep)
		SELECT deep.id::text FROM deep, done`, promptID, PoisonedDeep).Scan(&deep)
	if err != nil {
		return nil, fmt.Errorf("write the deep block: %w", err)
	}
	if _, err := db.Exec(ctx, `SELECT convo.complete_prompt($1::uuid)`, promptID); err != nil {
		return nil, fmt.Errorf("complete the prompt: %w", err)
	}
	if err := Poison(ctx, db, text, `{"n": 1e400, "tiny": 1e-400}`, ""); err != nil {
		return nil, err
	}
	if err := Poison(ctx, db, tool, "", PoisonNumber); err != nil {
		return nil, err
	}
	if err := Poison(ctx, db, deep, PoisonDeep(12_000), ""); err != nil {
		return nil, err
	}
	return []string{text, tool, deep}, nil
}

// Beginner is what StartPoisonedToolCall runs on: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// StartPoisonedToolCall plays a worker of a database before the rule: it
// starts a tool call (calc) whose input is PoisonNumber on a new tool_use
// block of the running prompt, in a transaction that lifts
// convo._json_check for its own calls and puts it back before it
// commits, so that the event a stream receives live (from the events
// table or, with the logical feed, from the WAL) carries the poisoned
// input. It returns the block's id.
func StartPoisonedToolCall(ctx context.Context, db Beginner, promptID string) (string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	var check string
	if err := tx.QueryRow(ctx, `SELECT pg_get_functiondef('convo._json_check(jsonb, text)'::regprocedure)`).Scan(&check); err != nil {
		return "", fmt.Errorf("read convo._json_check: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE OR REPLACE FUNCTION convo._json_check(p_value jsonb, p_field text) RETURNS jsonb
		LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT p_value'`); err != nil {
		return "", fmt.Errorf("lift convo._json_check: %w", err)
	}
	var block string
	err = tx.QueryRow(ctx, `
		WITH tool AS (SELECT convo.start_block($1::uuid, 'tool_use', '{"name": "calc"}') AS id),
		     call AS (SELECT convo.start_tool_call(tool.id, 'calc', $2::jsonb) FROM tool)
		SELECT tool.id::text FROM tool, call`, promptID, PoisonNumber).Scan(&block)
	if err != nil {
		return "", fmt.Errorf("start the tool call: %w", err)
	}
	if _, err := tx.Exec(ctx, check); err != nil {
		return "", fmt.Errorf("put convo._json_check back: %w", err)
	}
	return block, tx.Commit(ctx)
}

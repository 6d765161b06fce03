package pgtest

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// FillConversation creates a conversation of owner holding replies
// completed exchanges, written through the SQL API as a client and a
// worker would: each a short user message and an assistant reply of one
// text block of replyBytes bytes. Nothing may be claiming prompts on the
// database meanwhile (run the server with CONVO_WORKERS=0). It returns the
// conversation's id.
func FillConversation(ctx context.Context, dsn, owner string, replies, replyBytes int) (uuid.UUID, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return uuid.Nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var id uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT id FROM convo.create_conversation($1, 'filled')`, owner).Scan(&id); err != nil {
		return uuid.Nil, fmt.Errorf("create conversation: %w", err)
	}
	// One round trip per reply; the text is built in the database.
	const reply = `
DO $$
DECLARE
    v_prompt uuid;
    v_block  uuid;
BEGIN
    SELECT s.prompt_ids[1] INTO v_prompt
      FROM convo.send_message(%[1]s, %[2]s::uuid, 'question ' || %[3]d, '[{}]') s;
    PERFORM convo.claim_prompt('pgtest-filler', 300);
    PERFORM convo.start_prompt(v_prompt);
    v_block := convo.start_block(v_prompt, 'text');
    PERFORM convo.append_block(v_block, left(repeat('lorem ipsum dolor sit amet ' || %[3]d || ' ', %[4]d / 20 + 1), %[4]d));
    PERFORM convo.end_block(v_block);
    PERFORM convo.complete_prompt(v_prompt);
END $$`
	quotedOwner := "'" + strings.ReplaceAll(owner, "'", "''") + "'"
	for i := range replies {
		sql := fmt.Sprintf(reply, quotedOwner, "'"+id.String()+"'", i, replyBytes)
		if _, err := conn.Exec(ctx, sql); err != nil {
			return uuid.Nil, fmt.Errorf("reply %d: %w", i, err)
		}
	}
	return id, nil
}

package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/internal/pgtest"
)

// legacyConversation writes a conversation as the schema before
// 00016_branches.sql held it, row by row (the functions of today need
// its columns): messages in position order, each reply with its
// completed prompt and every message with one text block.
type legacyConversation struct {
	t    *testing.T
	tb   *testBundle
	id   uuid.UUID
	next int64
}

func newLegacyConversation(t *testing.T, tb *testBundle) *legacyConversation {
	t.Helper()
	c := &legacyConversation{t: t, tb: tb, id: uuid.New(), next: 1}
	if _, err := tb.pool.Exec(context.Background(),
		`INSERT INTO convo.conversations (id, owner_id, last_seq) VALUES ($1, 'local', 100)`, c.id); err != nil {
		t.Fatal(err)
	}
	return c
}

// message adds a completed message; comparison and slot make a reply one
// side of an A/B comparison (the comparison row is the caller's).
func (c *legacyConversation) message(role, text string, comparison uuid.NullUUID, slot string) (messageID, promptID uuid.UUID) {
	c.t.Helper()
	ctx := context.Background()
	var slotArg any
	if slot != "" {
		slotArg = slot
	}
	if err := c.tb.pool.QueryRow(ctx, `INSERT INTO convo.messages (conversation_id, position, role, status, comparison_id, comparison_slot)
		VALUES ($1, $2, $3, 'completed', $4, $5) RETURNING id`, c.id, c.next, role, comparison, slotArg).Scan(&messageID); err != nil {
		c.t.Fatal(err)
	}
	c.next++
	var prompt uuid.NullUUID
	if role == "assistant" {
		if err := c.tb.pool.QueryRow(ctx, `INSERT INTO convo.prompts (conversation_id, message_id, status, started_at, ended_at)
			VALUES ($1, $2, 'completed', now(), now()) RETURNING id`, c.id, messageID).Scan(&promptID); err != nil {
			c.t.Fatal(err)
		}
		prompt = uuid.NullUUID{UUID: promptID, Valid: true}
	}
	if _, err := c.tb.pool.Exec(ctx, `INSERT INTO convo.blocks (conversation_id, message_id, prompt_id, position, block_type, status, content, ended_at)
		VALUES ($1, $2, $3, 0, 'text', 'completed', $4, now())`, c.id, messageID, prompt, text); err != nil {
		c.t.Fatal(err)
	}
	return messageID, promptID
}

// legacyReaders is what readers saw of a database before the migration:
// each conversation's messages in order, and what each prompt's model was
// shown (prompt_context), read with SQL of that schema.
func legacyReaders(t *testing.T, tb *testBundle, conversations ...uuid.UUID) (messages map[uuid.UUID][]uuid.UUID, shown map[uuid.UUID][]string) {
	t.Helper()
	ctx := context.Background()
	messages, shown = map[uuid.UUID][]uuid.UUID{}, map[uuid.UUID][]string{}
	for _, c := range conversations {
		rows, err := tb.pool.Query(ctx, `SELECT id FROM convo.messages WHERE conversation_id = $1 ORDER BY position`, c)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			messages[c] = append(messages[c], id)
		}
		rows.Close()
	}
	rows, err := tb.pool.Query(ctx, `SELECT prompt_id, message_id::text || ':' || content FROM convo.prompt_context
		ORDER BY prompt_id, message_position, block_position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var prompt uuid.UUID
		var row string
		if err := rows.Scan(&prompt, &row); err != nil {
			t.Fatal(err)
		}
		shown[prompt] = append(shown[prompt], row)
	}
	return messages, shown
}

// TestBranchesMigration migrates a database holding conversations of the
// schema before trees (a regenerated reply; an A/B comparison with a
// vote and a message after it) and checks that readers see the same: the
// same messages in order, except that a replaced reply is now a version
// behind its replacement ("‹ 1 / 2 ›"), and every prompt's model context
// is unchanged.
func TestBranchesMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	if _, err := migrations(t, dsn).DownTo(ctx, 15); err != nil {
		t.Fatalf("down to 15: %v", err)
	}

	plain := newLegacyConversation(t, tb)
	u1, _ := plain.message("user", "hi", uuid.NullUUID{}, "")
	replaced, _ := plain.message("assistant", "first try", uuid.NullUUID{}, "")
	replacement, _ := plain.message("assistant", "second try", uuid.NullUUID{}, "")
	u2, _ := plain.message("user", "more", uuid.NullUUID{}, "")
	a2, _ := plain.message("assistant", "ok", uuid.NullUUID{}, "")

	pair := newLegacyConversation(t, tb)
	comparison := uuid.NullUUID{UUID: uuid.New(), Valid: true}
	pick, _ := pair.message("user", "pick", uuid.NullUUID{}, "")
	// The comparison row names both prompts, which name their messages:
	// the messages first, then the comparison, then the link.
	sideA, promptA := pair.message("assistant", "A", uuid.NullUUID{}, "a")
	sideB, promptB := pair.message("assistant", "B", uuid.NullUUID{}, "b")
	if _, err := tb.pool.Exec(ctx, `INSERT INTO convo.comparisons (id, conversation_id, user_message_id, prompt_a, prompt_b, preference, voted_at)
		VALUES ($1, $2, $3, $4, $5, 'b', now())`, comparison.UUID, pair.id, pick, promptA, promptB); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.messages SET comparison_id = $1 WHERE id IN ($2, $3)`, comparison.UUID, sideA, sideB); err != nil {
		t.Fatal(err)
	}
	next, _ := pair.message("user", "next", uuid.NullUUID{}, "")
	nextReply, _ := pair.message("assistant", "fine", uuid.NullUUID{}, "")

	messagesBefore, contextBefore := legacyReaders(t, tb, plain.id, pair.id)
	if len(contextBefore) == 0 {
		t.Fatal("the legacy prompt_context showed no prompt anything: the fixture is wrong")
	}

	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatalf("up: %v", err)
	}
	_, contextAfter := legacyReaders(t, tb)
	for prompt, rows := range contextBefore {
		if !slices.Equal(contextAfter[prompt], rows) {
			t.Errorf("prompt %s's model context changed:\nbefore %v\nafter  %v", prompt, rows, contextAfter[prompt])
		}
	}
	if len(contextAfter) != len(contextBefore) {
		t.Errorf("%d prompts have a context after the migration, %d before", len(contextAfter), len(contextBefore))
	}

	ids := func(conv uuid.UUID) []uuid.UUID {
		var out []uuid.UUID
		for _, m := range tb.state(t, conv).Messages {
			out = append(out, m.ID)
		}
		return out
	}
	// The pair's conversation reads exactly as before; the plain one
	// without the replaced reply, which is a version of its replacement.
	if got := ids(pair.id); !slices.Equal(got, messagesBefore[pair.id]) {
		t.Errorf("the comparison's conversation reads %v; before %v", got, messagesBefore[pair.id])
	}
	if got, want := ids(plain.id), []uuid.UUID{u1, replacement, u2, a2}; !slices.Equal(got, want) {
		t.Errorf("the regenerated conversation reads %v; want %v (before: %v)", got, want, messagesBefore[plain.id])
	}
	st := tb.state(t, plain.id)
	if m := st.Messages[1]; m.SiblingCount != 2 || m.SiblingIndex != 1 || m.ParentID.UUID != u1 {
		t.Errorf("the replacement: parent %v, version %d of %d; want below %s, 2 of 2", m.ParentID, m.SiblingIndex+1, m.SiblingCount, u1)
	}
	parents := map[uuid.UUID]uuid.NullUUID{}
	rows, err := tb.pool.Query(ctx, `SELECT id, parent_id FROM convo.messages`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		var parent uuid.NullUUID
		if err := rows.Scan(&id, &parent); err != nil {
			t.Fatal(err)
		}
		parents[id] = parent
	}
	rows.Close()
	for child, parent := range map[uuid.UUID]uuid.UUID{
		replaced: u1, replacement: u1, u2: replacement, a2: u2,
		sideA: pick, sideB: pick, next: sideA, nextReply: next,
	} {
		if parents[child].UUID != parent {
			t.Errorf("message %s hangs below %v; want %s", child, parents[child], parent)
		}
	}
	if parents[u1].Valid || parents[pick].Valid {
		t.Error("a first message has a parent")
	}

	// The tree works on: switching to the replaced reply shows it.
	if leaf, err := tb.store.SwitchBranch(ctx, "local", plain.id, replaced); err != nil || leaf != replaced {
		t.Fatalf("switch to the replaced reply = %s, %v", leaf, err)
	}
	if got, want := ids(plain.id), []uuid.UUID{u1, replaced}; !slices.Equal(got, want) {
		t.Errorf("after the switch: %v; want %v", got, want)
	}
}

package postgres_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// recursiveLeaf is the leaf switch_branch must choose, as a plain
// recursive query finds it: every message below the one named (slot "a"
// for a comparison's "b"), the newest of them, and slot "a" when that is
// a pair's "b". (switch_branch's own query keeps each level's look-up
// apart, OFFSET 0, for its plan.)
const recursiveLeaf = `
WITH RECURSIVE down(id) AS (
    SELECT coalesce((SELECT a.id FROM convo.messages b JOIN convo.messages a
                       ON a.comparison_id = b.comparison_id AND a.comparison_slot = 'a'
                      WHERE b.id = $1 AND b.comparison_slot = 'b'), $1)
    UNION ALL
    SELECT m.id FROM down CROSS JOIN LATERAL (SELECT x.id FROM convo.messages x WHERE x.parent_id = down.id) m
)
SELECT CASE WHEN m.comparison_slot = 'b'
            THEN (SELECT a.id FROM convo.messages a WHERE a.comparison_id = m.comparison_id AND a.comparison_slot = 'a')
            ELSE m.id END
  FROM convo.messages m JOIN down ON m.id = down.id
 ORDER BY m.position DESC LIMIT 1`

// loopPath is the path down to a leaf as convo._path made it before it
// became one recursive query: _context_messages' loop up the tree (the
// ancestors, and the other reply of each comparison among them), the
// leaf, and the leaf's own comparison's replies.
const loopPath = `
SELECT ARRAY(SELECT p FROM (
    SELECT c.id AS p FROM convo._context_messages($1) c(id)
    UNION
    SELECT $1
    UNION
    SELECT pr.message_id FROM convo.messages leaf
      JOIN convo.comparisons c ON c.id = leaf.comparison_id
      JOIN convo.prompts pr ON pr.id IN (c.prompt_a, c.prompt_b)
     WHERE leaf.id = $1) x ORDER BY p)`

// TestSwitchBranchWalkMatchesRecursive grows random trees (sends, A/B
// comparisons, edits of any user message, regenerations of any reply,
// switches to any message) and switches to every message of each: the
// leaf switch_branch chooses is the recursive query's, and the active
// path is then the path down to it (convo._path, which gives the path
// loopPath does), with _active_leaf that leaf.
func TestSwitchBranchWalkMatchesRecursive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	one := []json.RawMessage{json.RawMessage(`{"model":"demo"}`)}
	two := []json.RawMessage{json.RawMessage(`{"model":"x"}`), json.RawMessage(`{"model":"y"}`)}
	for seed := uint64(1); seed <= 4; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 0))
		res, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "local", Text: "root", ModelConfigs: one})
		if err != nil {
			t.Fatal(err)
		}
		conv := res.ConversationID
		tb.answerWith(t, res.PromptIDs[0], "re: root")
		// messages lists the conversation's messages: id, role, and
		// whether it is one of a comparison's replies.
		messages := func() (ids []uuid.UUID, users, replies []uuid.UUID) {
			rows, err := tb.pool.Query(ctx, `SELECT id, role, comparison_id IS NOT NULL FROM convo.messages WHERE conversation_id = $1 ORDER BY position`, conv)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id uuid.UUID
				var role string
				var compared bool
				if err := rows.Scan(&id, &role, &compared); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
				switch {
				case role == "user":
					users = append(users, id)
				case !compared:
					replies = append(replies, id)
				}
			}
			return ids, users, replies
		}
		for step := range 30 {
			_, users, replies := messages()
			text := "s" + strconv.FormatUint(seed, 10) + "." + strconv.Itoa(step)
			switch op := rnd.IntN(10); {
			case op < 3: // a turn, an A/B comparison one time in three
				configs := one
				if rnd.IntN(3) == 0 {
					configs = two
				}
				r, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "local", ConversationID: conv, Text: text, ModelConfigs: configs})
				if err != nil {
					t.Fatal(err)
				}
				answers := map[uuid.UUID]string{}
				for _, p := range r.PromptIDs {
					answers[p] = "re: " + text
				}
				tb.answerAll(t, answers)
			case op < 5:
				ed, err := tb.store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: conv, MessageID: users[rnd.IntN(len(users))], Text: text})
				if err != nil {
					t.Fatal(err)
				}
				tb.answerWith(t, ed.PromptID, "re: "+text)
			case op < 7:
				re, err := tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: conv,
					MessageID: uuid.NullUUID{UUID: replies[rnd.IntN(len(replies))], Valid: true}})
				if err != nil {
					t.Fatal(err)
				}
				tb.answerWith(t, re.PromptID, "re: "+text)
			default:
				ids, _, _ := messages()
				if _, err := tb.store.SwitchBranch(ctx, "local", conv, ids[rnd.IntN(len(ids))]); err != nil {
					t.Fatal(err)
				}
			}
		}
		ids, _, _ := messages()
		for _, m := range append(ids, ids...) { // twice: from every path to every other
			var want uuid.UUID
			if err := tb.pool.QueryRow(ctx, recursiveLeaf, m).Scan(&want); err != nil {
				t.Fatal(err)
			}
			got, err := tb.store.SwitchBranch(ctx, "local", conv, m)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("seed %d: switch_branch to %s chose %s; the recursive query, %s", seed, m, got, want)
			}
			var marked, path, loop []uuid.UUID
			var leaf uuid.UUID
			if err := tb.pool.QueryRow(ctx, `
				SELECT ARRAY(SELECT id FROM convo.messages WHERE conversation_id = $1 AND on_active_path ORDER BY id),
				       ARRAY(SELECT p FROM convo._path($2) p ORDER BY p),
				       convo._active_leaf($1)`, conv, got).Scan(&marked, &path, &leaf); err != nil {
				t.Fatal(err)
			}
			if err := tb.pool.QueryRow(ctx, loopPath, got).Scan(&loop); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(marked, path) || !slices.Equal(path, loop) || leaf != got {
				t.Fatalf("seed %d: after the switch to %s (leaf %s) the marked path is %v, _active_leaf %s; want _path: %v, which must be the loop's: %v",
					seed, m, got, marked, leaf, path, loop)
			}
		}
		t.Logf("seed %d: %d messages, each switched to twice", seed, len(ids))
	}
}

package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// BenchmarkSearch measures one search (a page of 20 results) of a user
// who has 10,000 messages of 10 KB, in 1,000 conversations, beside another
// user who has 10,000 messages of 2 KB, each holding "quixotic" (which the
// first user's never do): "common" finds a word every message of both
// holds, "rare" one that 10 of the user's hold, "phrase" a quoted phrase,
// "manyTerms" is the costliest query the rules allow: 32 words joined by
// or, each in about 40% of the messages; "othersWord" looks for the other
// user's word, and finds nothing.
//
//	go test -run '^$' -bench Search -benchtime 10x ./postgres/
func BenchmarkSearch(b *testing.B) {
	tb := setup(b)
	vocabulary := fillSearch(b, tb, "bench", 10_000, 10_000, "")
	fillSearch(b, tb, "other", 10_000, 2_000, "quixotic")
	manyTerms := strings.Join(vocabulary[:32], " or ")
	for _, c := range []struct {
		name, query string
		found       bool
	}{
		{"common", "lorem", true},
		{"rare", "zymurgy", true},
		{"phrase", `"lorem ipsum"`, true},
		{"manyTerms", manyTerms, true},
		{"othersWord", "quixotic", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				results, err := tb.store.Search(ctx, "bench", c.query, 20)
				if err != nil {
					b.Fatal(err)
				}
				if (len(results) > 0) != c.found {
					b.Fatalf("%q found %d results", c.query, len(results))
				}
			}
		})
	}
}

// fillSearch gives owner n messages of about size bytes each, 10 to a
// conversation, written as send_message stores them (one completed text
// block each). The text is words of a made-up vocabulary (returned), with
// "lorem ipsum" about every 200 words, "zymurgy" in every 1,000th message
// and marker (unless empty) at the end of every message.
func fillSearch(t testing.TB, tb *testBundle, owner string, n, size int, marker string) []string {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	// Pseudo-words of 2 to 4 syllables: no "y" or "z", so none is one of
	// the words searched for.
	consonants, vowels := "bcdfghklmnprstv", "aeiou"
	vocabulary := make([]string, 0, 3000)
	seen := map[string]bool{}
	for len(vocabulary) < cap(vocabulary) {
		var w strings.Builder
		for range 2 + rng.IntN(3) {
			w.WriteByte(consonants[rng.IntN(len(consonants))])
			w.WriteByte(vowels[rng.IntN(len(vowels))])
		}
		if !seen[w.String()] {
			seen[w.String()] = true
			vocabulary = append(vocabulary, w.String())
		}
	}
	text := func(i int) string {
		var s strings.Builder
		for s.Len() < size {
			switch {
			case rng.IntN(200) == 0:
				s.WriteString("lorem ipsum")
			case i%1000 == 0 && rng.IntN(500) == 0:
				s.WriteString("zymurgy")
			default:
				s.WriteString(vocabulary[rng.IntN(len(vocabulary))])
			}
			s.WriteString(". "[rng.IntN(8)/7:])
		}
		if i%1000 == 0 {
			s.WriteString(" zymurgy")
		}
		if marker != "" {
			s.WriteString(" " + marker)
		}
		return s.String()
	}
	const perConversation, batch = 10, 500
	for start := 0; start < n; start += batch {
		var conversations []uuid.UUID
		var positions []int64
		var texts []string
		for i := start; i < min(start+batch, n); i++ {
			if i%perConversation == 0 {
				var id uuid.UUID
				if err := tb.pool.QueryRow(ctx, `INSERT INTO convo.conversations (owner_id, title) VALUES ($1, $2) RETURNING id`,
					owner, fmt.Sprintf("Conversation %d", i/perConversation)).Scan(&id); err != nil {
					t.Fatal(err)
				}
				conversations = append(conversations, id)
			} else {
				conversations = append(conversations, conversations[len(conversations)-1])
			}
			positions = append(positions, int64(i%perConversation))
			texts = append(texts, text(i))
		}
		if _, err := tb.pool.Exec(ctx, `
			WITH t AS (SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS t(conversation_id, position, content)),
			     m AS (INSERT INTO convo.messages (conversation_id, position, role, status)
			           SELECT conversation_id, position, 'user', 'completed' FROM t
			           RETURNING id, conversation_id, position)
			INSERT INTO convo.blocks (conversation_id, message_id, position, block_type, status, content, ended_at)
			SELECT m.conversation_id, m.id, 0, 'text', 'completed', t.content, now()
			  FROM m JOIN t USING (conversation_id, position)`,
			conversations, positions, texts); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.pool.Exec(ctx, `VACUUM ANALYZE convo.conversations, convo.messages, convo.blocks`); err != nil {
		t.Fatal(err)
	}
	return vocabulary
}

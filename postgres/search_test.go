package postgres_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// searchVector returns a block's stored search vector as text ("" for an
// empty vector, "NULL" for none).
func (tb *testBundle) searchVector(t testing.TB, block uuid.UUID) string {
	t.Helper()
	var v string
	if err := tb.pool.QueryRow(context.Background(),
		`SELECT coalesce(search_vector::text, 'NULL') FROM convo.blocks WHERE id = $1`, block).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func (tb *testBundle) search(t testing.TB, owner, query string) []conversation.SearchResult {
	t.Helper()
	results, err := tb.store.Search(context.Background(), owner, query, 20)
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	return results
}

// hexWord is the i-th of many distinct words, 32 characters each.
func hexWord(i int) string {
	sum := md5.Sum([]byte(strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}

// TestSearchVector checks blocks.search_vector, the stored tsvector that
// search matches and ranks with: computed when a text block's content is
// stored (when it ends; appends never compute it), and bounded, so that a
// reply of any length ends.
func TestSearchVector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ComputedWhenTheBlockEnds", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		block := tb.startBlock(t, r.promptID, "text")
		reasoning := tb.startBlock(t, r.promptID, "reasoning")
		tb.append(t, block, "sourdough ")
		tb.append(t, block, "starters ferment")
		tb.append(t, reasoning, "sourdough thoughts")
		// While the block streams its text is in events only: the
		// vector is empty, and search does not find it.
		if v := tb.searchVector(t, block); v != "" {
			t.Errorf("vector of a streaming block = %q; want empty", v)
		}
		if got := tb.search(t, "local", "sourdough"); len(got) != 0 {
			t.Errorf("search found a streaming block: %+v", got)
		}
		if err := tb.api.PromptComplete(ctx, r.promptID); err != nil { // ends both blocks
			t.Fatal(err)
		}
		if v := tb.searchVector(t, block); v != "'ferment':3 'sourdough':1 'starter':2" {
			t.Errorf("vector of the ended block = %q", v)
		}
		if v := tb.searchVector(t, reasoning); v != "NULL" {
			t.Errorf("a reasoning block has vector %q; only text blocks are searched", v)
		}
		got := tb.search(t, "local", "sourdough")
		if len(got) != 1 || got[0].MessageID != r.messageID || got[0].Snippet != "sourdough starters ferment" {
			t.Fatalf("search after the end = %+v; want the reply", got)
		}
	})

	t.Run("AReplyOfAnyLengthEnds", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		block := tb.startBlock(t, r.promptID, "text")
		// 60,000 distinct words, 2 MB: their full tsvector would pass
		// PostgreSQL's limit of 1 MB, which made end_block fail.
		const words = 60_000
		var chunk strings.Builder
		for i := range words {
			chunk.WriteString(hexWord(i))
			chunk.WriteByte(' ')
			if chunk.Len() > 64<<10 || i == words-1 {
				tb.append(t, block, chunk.String())
				chunk.Reset()
			}
		}
		if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: block}); err != nil {
			t.Fatalf("end a 2 MB block: %v", err)
		}
		// The vector covers the first 100,000 characters (about 3,000
		// words of 33); the snippet is taken from the first 10,000.
		got := tb.search(t, "local", hexWord(0))
		if len(got) != 1 || len(got[0].Highlights) != 1 || !strings.HasPrefix(got[0].Snippet, hexWord(0)) {
			t.Fatalf("search for the first word = %+v", got)
		}
		if got := tb.search(t, "local", hexWord(2000)); len(got) != 1 {
			t.Errorf("search for word 2,000 (character 66,000) = %+v; want the reply", got)
		}
		if got := tb.search(t, "local", hexWord(50_000)); len(got) != 0 {
			t.Errorf("search for word 50,000 (character 1,650,000) = %+v; only the first 100,000 characters are searched", got)
		}
	})
}

// TestSearchVectorMigration rolls 00012_search_vector.sql back, writes a
// message, and applies it again: the migration computes the vector of
// every text block already there, those written before the column existed
// included.
func TestSearchVectorMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	before := tb.sendMessage(t, uuid.Nil, "sourdough before the roll back")

	provider := migrations(t, dsn)
	if _, err := provider.DownTo(ctx, 11); err != nil {
		t.Fatalf("down to 11: %v", err)
	}
	tb = setupDSN(t, dsn) // the pool's cached plans name the dropped column
	// As a client of that schema would: send_message as it then was.
	var during uuid.UUID
	if err := tb.pool.QueryRow(ctx, `SELECT user_message_id FROM convo.send_message('local', $1, 'sourdough while rolled back', '[{}]')`,
		before.conversationID).Scan(&during); err != nil {
		t.Fatalf("send a message while rolled back: %v", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	tb = setupDSN(t, dsn)

	var empty int
	if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.blocks
		WHERE block_type = 'text' AND content <> '' AND search_vector = ''::tsvector`).Scan(&empty); err != nil || empty != 0 {
		t.Fatalf("%d text blocks without a vector after up, %v", empty, err)
	}
	got := tb.search(t, "local", "sourdough")
	if len(got) != 2 {
		t.Fatalf("search after up = %+v; want both messages (%v, %v)", got, before, during)
	}
}

// TestSearchOwnConversationsOnly checks that a search finds the caller's
// messages and never another owner's: the index is asked for the caller's
// conversations (00024_batched_ends_owner_search.sql), whatever others hold of the
// words searched.
func TestSearchOwnConversationsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	fillSearch(t, tb, "bob", 200, 300, "sourdough levain")
	fillSearch(t, tb, "alice", 30, 300, "levain")
	fillSearch(t, tb, "alice", 1, 100, "sourdough")
	conversations := func(owner string) map[uuid.UUID]bool {
		rows, err := tb.pool.Query(ctx, `SELECT id FROM convo.conversations WHERE owner_id = $1`, owner)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		ids := map[uuid.UUID]bool{}
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids[id] = true
		}
		return ids
	}
	owned := map[string]map[uuid.UUID]bool{"alice": conversations("alice"), "bob": conversations("bob")}

	for _, c := range []struct {
		owner, query string
		want         int
	}{
		{"alice", "sourdough", 1},            // bob's 200 hold it too
		{"bob", "sourdough", 20},             // a full page, all his
		{"alice", "levain", 20},              // a page of her 30; bob\'s 200 hold it too
		{"alice", "sourdough or zymurgy", 2}, // her first message and her last; bob\'s hold both
		{"carol", "sourdough", 0},            // no conversation at all
	} {
		got := tb.search(t, c.owner, c.query)
		if len(got) != c.want {
			t.Errorf("%s searching %q: %d results, want %d", c.owner, c.query, len(got), c.want)
		}
		for _, r := range got {
			if !owned[c.owner][r.ConversationID] {
				t.Errorf("%s searching %q found message %s of conversation %s, not theirs", c.owner, c.query, r.MessageID, r.ConversationID)
			}
		}
	}
}

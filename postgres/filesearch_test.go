package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/postgres"
)

// sendAs sends text holding fileIDs as owner in a new conversation and
// returns its user message.
func (tb *testBundle) sendAs(t testing.TB, owner, text string, fileIDs ...uuid.UUID) conversation.SendMessageResult {
	t.Helper()
	res, err := tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: owner, Text: text, FileIDs: fileIDs,
		ModelConfigs: []json.RawMessage{json.RawMessage(`{"model":"demo"}`)},
	})
	if err != nil {
		t.Fatalf("send as %s: %v", owner, err)
	}
	return res
}

// upload uploads data as owner's file name and checks its media type.
func upload(t testing.TB, svc *files.Service, owner, name, declared string, data []byte, mediaType string) files.File {
	t.Helper()
	f, err := svc.Upload(context.Background(), owner, name, declared, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("upload %s: %v", name, err)
	}
	if f.MediaType != mediaType {
		t.Fatalf("upload %s: media type %q, want %q", name, f.MediaType, mediaType)
	}
	return f
}

// fileBlockID returns the id of message's file block of file.
func (tb *testBundle) fileBlockID(t testing.TB, message, file uuid.UUID) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := tb.pool.QueryRow(context.Background(), `SELECT id FROM convo.blocks
		WHERE message_id = $1 AND block_type = 'file' AND metadata->>'fileId' = $2::text`, message, file).Scan(&id); err != nil {
		t.Fatalf("file block of %s in %s: %v", file, message, err)
	}
	return id
}

// highlighted returns the highlighted words of r.
func highlighted(r conversation.SearchResult) []string {
	var out []string
	for _, h := range r.Highlights {
		out = append(out, strings.ToLower(string([]rune(r.Snippet)[h.Start:h.End])))
	}
	return out
}

// TestFileTextSearch checks that a message holding a text file is found
// by the file's words, naming the file block with a snippet of the
// file's text; that a message whose text and file both match is one
// result; and that a file held by no message, or by a deleted one, is
// not found.
func TestFileTextSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, tb := fileService(t, files.Limits{})

	notes := upload(t, svc, "alice", "notes.md", "text/markdown",
		[]byte("# Field notes\n\nThe quokka lives on Rottnest Island, a small marsupial that smiles.\n"), "text/markdown; charset=utf-8")
	csv := upload(t, svc, "alice", "sightings.csv", "",
		[]byte("island,animal,count\nRottnest,quokka,12\nBald,wallaby,3\n"), "text/csv")
	withFile := tb.sendAs(t, "alice", "Look at these", notes.ID)
	both := tb.sendAs(t, "alice", "A quokka count from the ferry", csv.ID)
	textOnly := tb.sendAs(t, "alice", "One more quokka photo")
	upload(t, svc, "alice", "unsent.txt", "", []byte("a quokka in a file no message holds"), "text/plain; charset=utf-8")

	got := tb.search(t, "alice", "quokka")
	byMessage := map[uuid.UUID]conversation.SearchResult{}
	for _, r := range got {
		if _, twice := byMessage[r.MessageID]; twice {
			t.Errorf("message %s is in the results twice", r.MessageID)
		}
		byMessage[r.MessageID] = r
	}
	if len(got) != 3 {
		t.Fatalf("%d results, want 3 (the message holding notes.md, the one whose text and file match, the text one): %+v", len(got), got)
	}
	r, ok := byMessage[withFile.UserMessageID]
	if !ok {
		t.Fatal("the message holding notes.md is not found by its file's word")
	}
	if want := tb.fileBlockID(t, withFile.UserMessageID, notes.ID); r.BlockID != want {
		t.Errorf("its block is %s, want the file block %s", r.BlockID, want)
	}
	if !strings.Contains(r.Snippet, "Rottnest Island") || strings.Contains(r.Snippet, "Look at these") {
		t.Errorf("its snippet %q is not of the file's text", r.Snippet)
	}
	if h := highlighted(r); len(h) != 1 || h[0] != "quokka" {
		t.Errorf("its highlights are %q in %q, want the one quokka", h, r.Snippet)
	}
	if r.ConversationID != withFile.ConversationID || r.Role != conversation.RoleUser {
		t.Errorf("result %+v, want the user message of conversation %s", r, withFile.ConversationID)
	}
	if _, ok := byMessage[both.UserMessageID]; !ok {
		t.Error("the message whose text and file both match is not found")
	}
	var textBlock uuid.UUID
	if err := tb.pool.QueryRow(ctx, `SELECT id FROM convo.blocks WHERE message_id = $1 AND block_type = 'text'`,
		textOnly.UserMessageID).Scan(&textBlock); err != nil {
		t.Fatal(err)
	}
	if r := byMessage[textOnly.UserMessageID]; r.BlockID != textBlock {
		t.Errorf("a text match names block %s, want its text block %s", r.BlockID, textBlock)
	}

	// Words only the file holds find it, through the CSV's cells too.
	if got := tb.search(t, "alice", "wallaby"); len(got) != 1 || got[0].MessageID != both.UserMessageID ||
		got[0].BlockID != tb.fileBlockID(t, both.UserMessageID, csv.ID) {
		t.Errorf("wallaby found %+v, want the message holding sightings.csv, its file block", got)
	}

	// A deleted conversation's files find nothing (the files remain until
	// the collector takes them).
	if err := tb.store.DeleteConversation(ctx, "alice", withFile.ConversationID); err != nil {
		t.Fatal(err)
	}
	if got := tb.search(t, "alice", "rottnest island"); len(got) != 1 || got[0].MessageID != both.UserMessageID {
		t.Errorf("after deleting the conversation holding notes.md, rottnest island found %+v, want only the CSV's message", got)
	}
}

// TestFileTextSearchOnlyText checks that only text files are indexed: the
// bytes of a PNG or a PDF are not, whatever words they hold.
func TestFileTextSearchOnlyText(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"), []byte(" quokka tEXt quokka quokka")...)
	pdf := []byte("%PDF-1.4\n1 0 obj << /Title (quokka) >> endobj\nBT (quokka quokka) Tj ET\n%%EOF\n")
	p := upload(t, svc, "alice", "q.png", "", png, "image/png")
	d := upload(t, svc, "alice", "q.pdf", "", pdf, "application/pdf")
	tb.sendAs(t, "alice", "two files", p.ID, d.ID)
	if got := tb.search(t, "alice", "quokka"); len(got) != 0 {
		t.Errorf("a PNG's or a PDF's bytes were searched: %+v", got)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_texts`); n != 0 {
		t.Errorf("%d files indexed, want none", n)
	}
}

// TestFileTextSearchOwnFilesOnly checks that another user's identical
// file, in another user's message, never matches.
func TestFileTextSearchOwnFilesOnly(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	data := []byte("the secret recipe: numbat biscuits\n")
	bobs := upload(t, svc, "bob", "recipe.txt", "", data, "text/plain; charset=utf-8")
	bobMsg := tb.sendAs(t, "bob", "mine", bobs.ID)
	alices := upload(t, svc, "alice", "recipe.txt", "", data, "text/plain; charset=utf-8")
	aliceMsg := tb.sendAs(t, "alice", "mine too", alices.ID)

	for owner, want := range map[string]uuid.UUID{"alice": aliceMsg.UserMessageID, "bob": bobMsg.UserMessageID} {
		got := tb.search(t, owner, "numbat")
		if len(got) != 1 || got[0].MessageID != want {
			t.Errorf("%s searching numbat found %+v, want only their message %s", owner, got, want)
		}
	}
	if got := tb.search(t, "carol", "numbat"); len(got) != 0 {
		t.Errorf("carol, who holds nothing, found %+v", got)
	}
}

// distinctWords returns n bytes of text made of distinct hyphenated words
// ("w0000001-x0000001 …"), each of which PostgreSQL indexes three times
// (whole and by its parts), and the first word.
func distinctWords(n int) (string, string) {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "w%07x-x%07x ", i, i)
	}
	return b.String()[:n], "w0000000-x0000000"
}

// TestFileTextSearchLargeFiles checks that the size and the words of a
// text file never refuse its upload: a 5 MiB file is stored whole and its
// first MiB is searchable (a word past it is not), and a file whose words
// are over tsvector's limit (to_tsvector refuses its text) is indexed in
// part.
func TestFileTextSearchLargeFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, tb := fileService(t, files.Limits{})

	t.Run("5MiB", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("echidna ")
		for b.Len() < files.MaxTextBytes {
			b.WriteString("spiny anteater lays eggs. ")
		}
		b.WriteString("platypus ")
		for b.Len() < 5<<20 {
			b.WriteString("a monotreme of the rivers. ")
		}
		f := upload(t, svc, "alice", "big.txt", "", []byte(b.String()), "text/plain; charset=utf-8")
		if f.Size != int64(b.Len()) {
			t.Fatalf("stored %d bytes of %d", f.Size, b.Len())
		}
		msg := tb.sendAs(t, "alice", "a big one", f.ID)
		if got := tb.search(t, "alice", "echidna"); len(got) != 1 || got[0].MessageID != msg.UserMessageID {
			t.Errorf("a word of the first MiB found %+v, want the message", got)
		}
		if got := tb.search(t, "alice", "platypus"); len(got) != 0 {
			t.Errorf("a word past the first MiB found %+v, want nothing", got)
		}
	})

	t.Run("OverTheTsvectorLimit", func(t *testing.T) {
		text, first := distinctWords(files.MaxTextBytes)
		if _, err := tb.pool.Exec(ctx, `SELECT to_tsvector('english', $1)`, text); err == nil {
			t.Fatal("to_tsvector took the text whole: it does not test the limit")
		}
		f := upload(t, svc, "bob", "words.txt", "", []byte(text), "text/plain; charset=utf-8")
		msg := tb.sendAs(t, "bob", "many words", f.ID)
		if got := tb.search(t, "bob", first); len(got) != 1 || got[0].MessageID != msg.UserMessageID {
			t.Errorf("the file's first word found %+v, want the message", got)
		}
	})
}

// TestFileTextSearchInvalidUTF8 checks that a text file with bytes that
// are not UTF-8 (and a NUL) past the start the media type is decided from
// is stored and indexed, its valid words found.
func TestFileTextSearchInvalidUTF8(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	data := []byte(strings.Repeat("plain words ", files.SniffBytes/12+1) + "caf\xe9 bilby\x00burrow \xff\xfe dunnart\n")
	f, err := svc.Upload(context.Background(), "alice", "latin1.txt", "text/plain", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	if !files.IsText(f.MediaType) {
		t.Fatalf("media type %q: the test needs a text file", f.MediaType)
	}
	msg := tb.sendAs(t, "alice", "odd bytes", f.ID)
	for _, word := range []string{"bilby", "burrow", "dunnart"} {
		if got := tb.search(t, "alice", word); len(got) != 1 || got[0].MessageID != msg.UserMessageID {
			t.Errorf("%s found %+v, want the message", word, got)
		}
	}
}

// TestFileTextSearchMigration checks the backfill of
// 00028_file_text_search.sql: text files stored in PostgreSQL before it
// are indexed as an upload now is (the same text, decoded by the same
// rule as files.DecodeText, the same vector), whatever their bytes; other
// files, and text files kept in S3, are not.
func TestFileTextSearchMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	if _, err := migrations(t, dsn).DownTo(ctx, 27); err != nil {
		t.Fatalf("down to 27: %v", err)
	}
	legacy := func(name, mediaType, storage string, data []byte) uuid.UUID {
		t.Helper()
		blob, file := uuid.New(), uuid.New()
		sum := sha256.Sum256(data)
		if _, err := tb.pool.Exec(ctx, `INSERT INTO convo.file_blobs (id, owner, sha256, size, storage) VALUES ($1, 'alice', $2, $3, $4)`,
			blob, hex.EncodeToString(sum[:]), len(data), storage); err != nil {
			t.Fatal(err)
		}
		for seq := 0; storage == "postgres" && seq*postgres.FileChunkBytes < len(data); seq++ {
			chunk := data[seq*postgres.FileChunkBytes : min(len(data), (seq+1)*postgres.FileChunkBytes)]
			if _, err := tb.pool.Exec(ctx, `INSERT INTO convo.file_chunks (blob_id, seq, data) VALUES ($1, $2, $3)`, blob, seq, chunk); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tb.pool.Exec(ctx, `INSERT INTO convo.files (id, owner, blob_id, filename, media_type, size, sha256)
			VALUES ($1, 'alice', $2, $3, $4, $5, $6)`, file, blob, name, mediaType, len(data), hex.EncodeToString(sum[:])); err != nil {
			t.Fatal(err)
		}
		return file
	}
	// A euro sign (3 bytes) cut by the 1 MiB cap: the first MiB ends with
	// its first byte.
	cut := []byte(strings.Repeat("x", files.MaxTextBytes-1) + "€ tail")
	indexed := map[string][]byte{
		"valid.txt":   []byte("the wombat digs"),
		"latin1.txt":  []byte("caf\xe9 wombat\x00den \xff\xfe end"),
		"cut.txt":     append([]byte("wombat "), cut[7:]...),
		"invalid.txt": append([]byte("wombat \xff "), cut[9:]...),
	}
	ids := map[string]uuid.UUID{}
	for name, data := range indexed {
		ids[name] = legacy(name, "text/plain; charset=utf-8", "postgres", data)
	}
	legacy("dot.png", "image/png", "postgres", []byte("\x89PNG\r\n\x1a\nwombat"))
	legacy("far.txt", "text/plain; charset=utf-8", "s3", []byte("wombat"))

	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatalf("up: %v", err)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_texts`); n != len(indexed) {
		t.Errorf("%d files indexed, want the %d text files in PostgreSQL", n, len(indexed))
	}
	for name, data := range indexed {
		text := files.DecodeText(data[:min(len(data), files.MaxTextBytes)])
		var sameHead, sameVector, hasWombat bool
		if err := tb.pool.QueryRow(ctx, `SELECT head = left($2, 10000), search_vector = convo._file_text_vector($2),
			search_vector @@ 'wombat'::tsquery FROM convo.file_texts WHERE file_id = $1`, ids[name], text).Scan(&sameHead, &sameVector, &hasWombat); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !sameHead || !sameVector || !hasWombat {
			t.Errorf("%s: the same head %v, the same vector %v as an upload's; holds wombat %v; want all true", name, sameHead, sameVector, hasWombat)
		}
	}
}

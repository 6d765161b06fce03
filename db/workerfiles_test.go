package db_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres"
)

// sendFiles sends text with fileIDs as the user "local" and returns the
// user message and the queued prompt.
func (tb *testBundle) sendFiles(t testing.TB, conversationID uuid.UUID, text string, fileIDs ...uuid.UUID) (userID uuid.UUID, r reply) {
	t.Helper()
	res, err := tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: "local", ConversationID: conversationID, Text: text, FileIDs: fileIDs,
		ModelConfigs: []json.RawMessage{json.RawMessage(`{"model":"demo"}`)},
	})
	if err != nil {
		t.Fatalf("send message with files: %v", err)
	}
	return res.UserMessageID, reply{conversationID: res.ConversationID, messageID: res.AssistantMessageIDs[0], promptID: res.PromptIDs[0]}
}

// claimAs claims the one queued prompt as worker and checks it is want.
func (tb *testBundle) claimAs(t testing.TB, worker string, want uuid.UUID) {
	t.Helper()
	claimed, err := tb.api.PromptClaim(context.Background(), apiq.PromptClaimParams{Worker: worker, LeaseSeconds: 30})
	if err != nil || len(claimed) != 1 || claimed[0].PromptID != want {
		t.Fatalf("claim as %s: %v %+v; want prompt %s", worker, err, claimed, want)
	}
}

// promptFiles lists the files of promptID's context, as worker w1 reads
// them, as "filename@message_position.file_position".
func (tb *testBundle) promptFiles(t testing.TB, promptID uuid.UUID) ([]apiq.WorkerFilesRow, string) {
	t.Helper()
	rows, err := tb.api.WorkerFiles(context.Background(), apiq.WorkerFilesParams{PromptID: promptID, Worker: "w1"})
	if err != nil {
		t.Fatalf("prompt_files: %v", err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Filename)
	}
	return rows, strings.Join(names, ", ")
}

// readChunks joins the chunks of file f of promptID, read as w1.
func (tb *testBundle) readChunks(t testing.TB, promptID uuid.UUID, f apiq.WorkerFilesRow) []byte {
	t.Helper()
	var out []byte
	for seq := range f.Chunks {
		data, err := tb.api.WorkerFileChunk(context.Background(), apiq.WorkerFileChunkParams{
			PromptID: promptID, Worker: "w1", FileID: f.FileID, Seq: seq,
		})
		if err != nil {
			t.Fatalf("file_chunk %s %d: %v", f.Filename, seq, err)
		}
		out = append(out, data...)
	}
	return out
}

// TestPromptFiles checks convo.prompt_files and convo.file_chunk: a prompt
// sees the files of the messages of its context (a message of files only
// included), in message then file order, and reads their bytes in 256 KiB
// chunks that join to the file (its SHA-256); it sees no file of a message
// off its path, nor of another conversation.
func TestPromptFiles(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	ctx := context.Background()
	upload := func(name string, data []byte) files.File {
		f, err := svc.Upload(ctx, "local", name, "", bytes.NewReader(data))
		if err != nil {
			t.Fatalf("upload %s: %v", name, err)
		}
		return f
	}
	notesBytes := []byte("first line of the notes\nsecond line\n")
	notes := upload("notes.txt", notesBytes)
	bigBytes := randomBytes(2*postgres.FileChunkBytes+777, 7)
	big := upload("big.bin", bigBytes)
	other := upload("other.txt", []byte("another file\n"))
	elsewhere := upload("elsewhere.txt", []byte("in another conversation\n"))

	// A message with text and a file, answered; then a message of a file
	// only, whose prompt w1 holds.
	first, r1 := tb.sendFiles(t, uuid.Nil, "look at this", notes.ID)
	tb.answerWith(t, r1.promptID, "seen")
	_, r2 := tb.sendFiles(t, r1.conversationID, "", big.ID)
	tb.claimAs(t, "w1", r2.promptID)

	rows, names := tb.promptFiles(t, r2.promptID)
	if names != "notes.txt, big.bin" {
		t.Fatalf("prompt_files = %q; want notes.txt, big.bin", names)
	}
	if rows[0].MessageID != first || rows[0].FilePosition != 0 || rows[1].MessagePosition <= rows[0].MessagePosition {
		t.Errorf("prompt_files' messages: %+v", rows)
	}
	for i, want := range []files.File{notes, big} {
		got := rows[i]
		if got.FileID != want.ID || got.MediaType != want.MediaType || got.Size != want.Size || got.Sha256 != want.SHA256 ||
			got.Storage != "postgres" || got.BlobID == uuid.Nil {
			t.Errorf("prompt_files[%d] = %+v; want %+v in postgres", i, got, want)
		}
	}
	if rows[0].Chunks != 1 || rows[1].Chunks != 3 {
		t.Errorf("chunks = %d, %d; want 1, 3", rows[0].Chunks, rows[1].Chunks)
	}
	for i, want := range [][]byte{notesBytes, bigBytes} {
		got := tb.readChunks(t, r2.promptID, rows[i])
		sum := sha256.Sum256(got)
		if !bytes.Equal(got, want) || hex.EncodeToString(sum[:]) != rows[i].Sha256 {
			t.Errorf("%s: the chunks joined are %d bytes, sha256 %x; want the file's %d bytes, %s",
				rows[i].Filename, len(got), sum, len(want), rows[i].Sha256)
		}
	}
	tb.complete(t, r2.promptID, "done")

	// An edit of the first message makes a branch whose messages hold
	// other.txt only: notes.txt and big.bin are off its path.
	edited, err := tb.store.EditMessage(ctx, conversation.EditParams{
		OwnerID: "local", ConversationID: r1.conversationID, MessageID: first, Text: "look at this instead",
		FileIDs: []uuid.UUID{other.ID},
	})
	if err != nil {
		t.Fatal(err)
	}
	tb.claimAs(t, "w1", edited.PromptID)
	if _, names := tb.promptFiles(t, edited.PromptID); names != "other.txt" {
		t.Errorf("prompt_files of the edit's reply = %q; want other.txt", names)
	}
	for _, f := range []files.File{notes, big, elsewhere} {
		_, err := tb.api.WorkerFileChunk(ctx, apiq.WorkerFileChunkParams{PromptID: edited.PromptID, Worker: "w1", FileID: f.ID, Seq: 0})
		if sqlstate.Of(err) != sqlstate.NotFound || !strings.Contains(err.Error(), f.ID.String()) {
			t.Errorf("file_chunk of %s, not in the prompt's context: %v; want CV001 naming the file", f.Filename, err)
		}
	}
	tb.complete(t, edited.PromptID, "done")

	// Another conversation's prompt sees its own file only.
	_, r3 := tb.sendFiles(t, uuid.Nil, "elsewhere", elsewhere.ID)
	tb.claimAs(t, "w1", r3.promptID)
	if _, names := tb.promptFiles(t, r3.promptID); names != "elsewhere.txt" {
		t.Errorf("prompt_files of another conversation = %q; want elsewhere.txt", names)
	}
	if _, err := tb.api.WorkerFileChunk(ctx, apiq.WorkerFileChunkParams{PromptID: r3.promptID, Worker: "w1", FileID: notes.ID, Seq: 0}); sqlstate.Of(err) != sqlstate.NotFound {
		t.Errorf("file_chunk of another conversation's file: %v; want CV001", err)
	}
}

// TestPromptFilesRefusals checks what prompt_files and file_chunk refuse,
// each with a clear error and changing nothing: a prompt the worker does
// not hold, a chunk out of range, a file whose bytes are in S3.
func TestPromptFilesRefusals(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	ctx := context.Background()
	f, err := svc.Upload(ctx, "local", "notes.txt", "", strings.NewReader("hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, r := tb.sendFiles(t, uuid.Nil, "see", f.ID)

	// Queued, claimed by nobody: no worker may read it.
	if _, err := tb.api.WorkerFiles(ctx, apiq.WorkerFilesParams{PromptID: r.promptID, Worker: "w1"}); sqlstate.Of(err) != sqlstate.NotFound {
		t.Errorf("prompt_files of a prompt nobody holds: %v; want CV001", err)
	}
	tb.claimAs(t, "w1", r.promptID)
	before := tb.fingerprint(t)
	if _, err := tb.api.WorkerFiles(ctx, apiq.WorkerFilesParams{PromptID: r.promptID, Worker: "w2"}); sqlstate.Of(err) != sqlstate.NotFound ||
		!strings.Contains(err.Error(), "not held by worker w2") {
		t.Errorf("prompt_files of another worker's prompt: %v; want CV001", err)
	}
	if _, err := tb.api.WorkerFileChunk(ctx, apiq.WorkerFileChunkParams{PromptID: r.promptID, Worker: "w2", FileID: f.ID}); sqlstate.Of(err) != sqlstate.NotFound {
		t.Errorf("file_chunk of another worker's prompt: %v; want CV001", err)
	}
	for _, seq := range []int32{-1, 1} {
		_, err := tb.api.WorkerFileChunk(ctx, apiq.WorkerFileChunkParams{PromptID: r.promptID, Worker: "w1", FileID: f.ID, Seq: seq})
		if sqlstate.Of(err) != sqlstate.InvalidArgument || !strings.Contains(err.Error(), "out of range") || !strings.Contains(err.Error(), "has 1 chunks") {
			t.Errorf("file_chunk seq %d: %v; want CV003 out of range", seq, err)
		}
	}

	if after := tb.fingerprint(t); after != before {
		t.Error("a refused read changed the database")
	}

	// A file whose bytes are in S3: listed, with its key; file_chunk says
	// where to read it.
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.file_blobs SET storage = 's3'`); err != nil {
		t.Fatal(err)
	}
	before = tb.fingerprint(t)
	rows, _ := tb.promptFiles(t, r.promptID)
	if len(rows) != 1 || rows[0].Storage != "s3" || rows[0].Chunks != 0 {
		t.Fatalf("prompt_files of a file in S3 = %+v; want storage s3, 0 chunks", rows)
	}
	_, err = tb.api.WorkerFileChunk(ctx, apiq.WorkerFileChunkParams{PromptID: r.promptID, Worker: "w1", FileID: f.ID, Seq: 0})
	if sqlstate.Of(err) != sqlstate.InvalidArgument || !strings.Contains(err.Error(), "are in s3") || !strings.Contains(err.Error(), rows[0].BlobID.String()) {
		t.Errorf("file_chunk of a file in S3: %v; want CV003 naming the object", err)
	}
	if after := tb.fingerprint(t); after != before {
		t.Error("a refused read changed the database")
	}
}

// BenchmarkFileChunk reads a 4 MiB file of a prompt's context through
// convo.file_chunk, a chunk (256 KiB) a call, as a worker does.
func BenchmarkFileChunk(b *testing.B) {
	svc, tb := fileService(b, files.Limits{})
	ctx := context.Background()
	data := randomBytes(4<<20, 3)
	f, err := svc.Upload(ctx, "local", "big.bin", "", bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	_, r := tb.sendFiles(b, uuid.Nil, "read", f.ID)
	tb.claimAs(b, "w1", r.promptID)
	rows, _ := tb.promptFiles(b, r.promptID)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if got := tb.readChunks(b, r.promptID, rows[0]); len(got) != len(data) {
			b.Fatalf("read %d bytes, want %d", len(got), len(data))
		}
	}
}

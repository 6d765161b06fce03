package db_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// promptReadAsApart is what convo.worker_prompt_read returned for
// promptID as worker w1, and what worker_context and prompt_files return
// apart, each row as text, its NULLs as WorkerPromptRead's zero values.
func promptReadAsApart(t *testing.T, tb *testBundle, q *apiq.Queries, promptID uuid.UUID) (got, want []string) {
	t.Helper()
	ctx := context.Background()
	read, err := q.WorkerPromptRead(ctx, apiq.WorkerPromptReadParams{PromptID: promptID, Worker: "w1"})
	if err != nil {
		t.Fatalf("worker_prompt_read: %v", err)
	}
	for _, r := range read {
		got = append(got, fmt.Sprintf("%s %s %d %s %s %q %s %s %s %s %s %q %q %d %s %s %s %d %s %s %s %d", r.Kind,
			r.MessageID, r.MessagePosition, r.Role, r.BlockType, r.Content, r.Metadata, r.ToolCallID, r.ToolName,
			r.ToolInput, r.ToolStatus, r.ToolOutput, r.ToolError, r.FilePosition, r.FileID, r.Filename, r.MediaType,
			r.Size, r.Sha256, r.Storage, r.BlobID, r.Chunks))
	}
	blocks, err := q.WorkerContext(ctx, apiq.WorkerContextParams{PromptID: promptID, Worker: "w1"})
	if err != nil {
		t.Fatalf("worker_context: %v", err)
	}
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	for _, b := range blocks {
		input := b.ToolInput
		if input == nil {
			input = json.RawMessage("null")
		}
		want = append(want, fmt.Sprintf("block %s %d %s %s %q %s %s %s %s %s %q %q 0 %s   0   %s 0", b.MessageID,
			b.MessagePosition, b.Role, b.BlockType, b.Content, b.Metadata, b.ToolCallID.UUID, str(b.ToolName), input,
			str(b.ToolStatus), str(b.ToolOutput), str(b.ToolError), uuid.Nil, uuid.Nil))
	}
	fileRows, err := q.WorkerFiles(ctx, apiq.WorkerFilesParams{PromptID: promptID, Worker: "w1"})
	if err != nil {
		t.Fatalf("prompt_files: %v", err)
	}
	for _, f := range fileRows {
		want = append(want, fmt.Sprintf("file %s %d   %q null %s  null  %q %q %d %s %s %s %d %s %s %s %d", f.MessageID,
			f.MessagePosition, "", uuid.Nil, "", "", f.FilePosition, f.FileID, f.Filename, f.MediaType, f.Size,
			f.Sha256, f.Storage, f.BlobID, f.Chunks))
	}
	return got, want
}

// TestWorkerPromptRead checks convo.worker_prompt_read, a worker's reads
// at a prompt's start in one call: the rows of worker_context then those
// of prompt_files, the same (a tool call, a file of a message of files
// only, an earlier message's file among them); in a conversation without
// files, no work of prompt_files' (its walk is not called); CV001 for a
// worker that does not hold the prompt, as the two say.
func TestWorkerPromptRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, tb := fileService(t, files.Limits{})
	notes, err := svc.Upload(ctx, "local", "notes.txt", "", bytes.NewReader([]byte("the notes\n")))
	if err != nil {
		t.Fatal(err)
	}
	big, err := svc.Upload(ctx, "local", "big.bin", "", bytes.NewReader(randomBytes(300_000, 3)))
	if err != nil {
		t.Fatal(err)
	}
	// A message with text and a file, answered with a tool call and text;
	// then a message of a file only, whose prompt w1 holds.
	_, r1 := tb.sendFiles(t, uuid.Nil, "look at this", notes.ID)
	tb.claimAs(t, "w1", r1.promptID)
	if err := tb.api.PromptStart(ctx, r1.promptID); err != nil {
		t.Fatal(err)
	}
	toolUse := tb.startBlock(t, r1.promptID, "tool_use")
	found := "found it"
	call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: toolUse, Name: "search", Input: json.RawMessage(`{"q":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: call, Output: &found}); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: toolUse}); err != nil {
		t.Fatal(err)
	}
	text := tb.startBlock(t, r1.promptID, "text")
	tb.append(t, text, "seen")
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: text}); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.PromptComplete(ctx, r1.promptID); err != nil {
		t.Fatal(err)
	}
	_, r2 := tb.sendFiles(t, r1.conversationID, "", big.ID)
	tb.claimAs(t, "w1", r2.promptID)

	got, want := promptReadAsApart(t, tb, tb.api, r2.promptID)
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 5 {
		t.Errorf("worker_prompt_read:\n  %q\nworker_context, then prompt_files (3 blocks, 2 files):\n  %q", got, want)
	}

	// A conversation without files: its blocks, and no prompt_files walk.
	r3 := tb.sendMessage(t, uuid.Nil, "no files here")
	tb.answerWith(t, r3.promptID, "right")
	_, r4 := tb.sendFiles(t, r3.conversationID, "still none")
	tb.claimAs(t, "w1", r4.promptID)
	got, want = promptReadAsApart(t, tb, tb.api, r4.promptID)
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 3 {
		t.Errorf("worker_prompt_read without files:\n  %q\nworker_context (3 blocks):\n  %q", got, want)
	}
	// The context's walk up the conversation (_context_messages) runs
	// once: for the blocks, not again for the files.
	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
		t.Fatal(err)
	}
	if _, err := apiq.New(tx).WorkerPromptRead(ctx, apiq.WorkerPromptReadParams{PromptID: r4.promptID, Worker: "w1"}); err != nil {
		t.Fatal(err)
	}
	var walks int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(pg_stat_get_xact_function_calls('convo._context_messages'::regproc), 0)`).Scan(&walks); err != nil {
		t.Fatal(err)
	}
	if walks != 1 {
		t.Errorf("worker_prompt_read walked the context %d times in a conversation without files; want once", walks)
	}

	if _, err := tb.api.WorkerPromptRead(ctx, apiq.WorkerPromptReadParams{PromptID: r2.promptID, Worker: "w2"}); sqlstate.Of(err) != sqlstate.NotFound {
		t.Errorf("worker_prompt_read of another worker's prompt: %v; want CV001", err)
	}
	if _, err := tb.api.WorkerPromptRead(ctx, apiq.WorkerPromptReadParams{PromptID: uuid.New(), Worker: "w1"}); sqlstate.Of(err) != sqlstate.NotFound {
		t.Errorf("worker_prompt_read of an unknown prompt: %v; want CV001", err)
	}
}

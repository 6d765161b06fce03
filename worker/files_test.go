package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/postgres"

	. "github.com/convo-dev/convo/worker"
)

// upload stores data as the user "local"'s file name.
func (tb *testBundle) upload(t testing.TB, name string, data []byte) files.File {
	t.Helper()
	svc := files.NewService(files.Options{
		Store: postgres.NewFileStore(tb.db), Blobs: postgres.NewFileBlobs(tb.db), Limits: files.Limits{},
	})
	f, err := svc.Upload(context.Background(), "local", name, "", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("upload %s: %v", name, err)
	}
	return f
}

// sendFiles sends text with fileIDs as the user "local".
func (tb *testBundle) sendFiles(t testing.TB, conversationID uuid.UUID, text, modelConfig string, fileIDs ...uuid.UUID) sent {
	t.Helper()
	res, err := tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: "local", ConversationID: conversationID, Text: text, FileIDs: fileIDs,
		ModelConfigs: []json.RawMessage{json.RawMessage(modelConfig)},
	})
	if err != nil {
		t.Fatalf("send message with files: %v", err)
	}
	return sent{conversationID: res.ConversationID, promptID: res.PromptIDs[0], messageID: res.AssistantMessageIDs[0]}
}

// replyText is the text of the reply's text blocks.
func (tb *testBundle) replyText(t testing.TB, s sent) string {
	t.Helper()
	var b strings.Builder
	for _, blk := range tb.message(t, s).Blocks {
		if blk.Type == "text" || blk.Type == "structured" {
			b.WriteString(blk.Content)
		}
	}
	return b.String()
}

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDemoAcknowledgesAttachments sends a message holding a text file and
// an image to the demo model, run by a login of the worker role: its
// reply names each file, the text file's first line and the image's size
// in pixels, which it can only know from the bytes.
func TestDemoAcknowledgesAttachments(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.useWorkerRole(t)
	notes := tb.upload(t, "notes.txt", []byte("Hello from the notes\nsecond line\n"))
	photo := tb.upload(t, "photo.png", pngBytes(t, 40, 30))
	_, res := tb.start(t, Config{})
	s := tb.sendFiles(t, uuid.Nil, "What do you make of these?", `{}`, notes.ID, photo.ID)
	if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
	}
	text := tb.replyText(t, s)
	for _, want := range []string{
		`You attached notes.txt (text/plain, 33 B); its first line: "Hello from the notes".`,
		fmt.Sprintf(`You attached photo.png (image/png, %s); 40×30 pixels.`, HumanBytes(photo.Size)),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the reply does not say %q:\n%s", want, text)
		}
	}

	// A message of files only, later: the demo acknowledges its file, and
	// not the earlier message's.
	more := tb.upload(t, "more.csv", []byte("a,b\n1,2\n"))
	s2 := tb.sendFiles(t, s.conversationID, "", `{}`, more.ID)
	if r := res.wait(t, s2.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
	}
	text = tb.replyText(t, s2)
	if !strings.Contains(text, `You attached more.csv (text/csv, 8 B); its first line: "a,b".`) || strings.Contains(text, "notes.txt") {
		t.Errorf("the reply to a message of files only:\n%s", text)
	}
}

// TestModelReadsFiles gives a model the files of every user message of
// its context, a message of files only included, in order, and a file
// of several chunks read whole matches its SHA-256.
func TestModelReadsFiles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	big := make([]byte, 2*postgres.FileChunkBytes+1000)
	for i := range big {
		big[i] = byte(i*7 + i/1000)
	}
	big[0] = 0 // not text
	first := tb.upload(t, "first.txt", []byte("one\n"))
	bigFile := tb.upload(t, "big.bin", big)

	// The model reports the files of each user message of its context,
	// each with the SHA-256 of the bytes it read.
	model := ModelFunc(func(ctx context.Context, req Request) iter.Seq2[Event, error] {
		return func(yield func(Event, error) bool) {
			var out []string
			for _, m := range req.Messages {
				if m.Role != RoleUser {
					continue
				}
				var names []string
				for _, f := range m.Files {
					data, cut, err := f.Read(ctx, -1)
					if err != nil {
						yield(nil, err)
						return
					}
					sum := sha256.Sum256(data)
					names = append(names, fmt.Sprintf("%s=%s cut=%v", f.Filename, hex.EncodeToString(sum[:]), cut))
				}
				out = append(out, fmt.Sprintf("%q:[%s]", m.Text, strings.Join(names, " ")))
			}
			if yield(Part{Index: 0, Chunk: MessageChunk(strings.Join(out, "\n"))}, nil) {
				yield(Finish{Reason: FinishStop}, nil)
			}
		}
	})
	models := NewModels("files")
	models.Register("files", model, "")
	_, res := tb.start(t, Config{Models: models})

	s := tb.sendFiles(t, uuid.Nil, "first", `{}`, first.ID)
	if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
	}
	s2 := tb.sendFiles(t, s.conversationID, "", `{}`, bigFile.ID)
	if r := res.wait(t, s2.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
	}
	want := fmt.Sprintf("\"first\":[first.txt=%s cut=false]\n\"\":[big.bin=%s cut=false]", first.SHA256, bigFile.SHA256)
	if got := tb.replyText(t, s2); got != want {
		t.Errorf("the model read:\n%s\nwant:\n%s", got, want)
	}
}

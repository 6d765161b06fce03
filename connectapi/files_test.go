package connectapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// pngBytes is a 1×1 PNG.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// upload stores a file of owner's, as POST /v1/files does.
func (tb *testBundle) upload(t testing.TB, owner, name, mediaType string, data []byte) files.File {
	t.Helper()
	f, err := tb.files.Upload(context.Background(), owner, name, mediaType, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("upload %s: %v", name, err)
	}
	return f
}

// fileBlocks is the files of a message's file blocks, in order.
func fileBlocks(m *convov1.Message) []*convov1.File {
	var out []*convov1.File
	for _, b := range m.GetBlocks() {
		if b.GetBlockType() == "file" {
			out = append(out, b.GetFile())
		}
	}
	return out
}

// checkFiles checks that got are the uploads want, in order, each with a
// signed URL that verifies for its file and has not expired.
func (tb *testBundle) checkFiles(t testing.TB, where string, got []*convov1.File, want ...files.File) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d file blocks, want %d", where, len(got), len(want))
	}
	for i, f := range got {
		w := want[i]
		if f.GetId() != w.ID.String() || f.GetFilename() != w.Filename || f.GetMediaType() != w.MediaType ||
			f.GetSize() != w.Size || f.GetSha256() != w.SHA256 {
			t.Errorf("%s: file %d is %v, want %+v", where, i, f, w)
		}
		u, err := url.Parse(f.GetUrl())
		if err != nil || u.Path != "/v1/files/"+w.ID.String()+"/content" {
			t.Errorf("%s: file %d url %q, want the file's content", where, i, f.GetUrl())
			continue
		}
		q := u.Query()
		if err := tb.signer.Verify(w.ID, q.Get("exp"), q.Get("sig"), time.Now()); err != nil {
			t.Errorf("%s: file %d's url does not verify: %v", where, i, err)
		}
		if !f.GetUrlExpiresAt().AsTime().After(time.Now()) {
			t.Errorf("%s: file %d's url expired at %v", where, i, f.GetUrlExpiresAt().AsTime())
		}
	}
}

// TestMessagesHoldFiles: a message sent with file_ids holds one file
// block per file, in order, after its text, and the live event, a new
// stream's snapshot and GetConversation all show the same files, each
// with a signed URL of its content.
func TestMessagesHoldFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOptions{files: true})
	first := tb.send(t, tb.client, "", "hello")
	conv := first.ConversationId
	tb.writeReply(t, first.PromptId, "hi")
	live := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: conv})

	notes := tb.upload(t, auth.LocalUser, "notes.txt", "text/plain", []byte("first line\nsecond line\n"))
	dot := tb.upload(t, auth.LocalUser, "dot.png", "image/png", pngBytes)
	res, err := tb.client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
		ConversationId: conv, Text: "look at these", FileIds: []string{notes.ID.String(), dot.ID.String()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	userID := res.Msg.UserMessageId

	// Live: the messageCreated of the user message.
	var created *convov1.Message
	deadline := time.Now().Add(streamTimeout)
	for created == nil && time.Now().Before(deadline) {
		live.mu.Lock()
		for _, r := range live.received {
			if m := r.GetEvent().GetMessageCreated().GetMessage(); m.GetId() == userID {
				created = m
			}
		}
		live.mu.Unlock()
		if created == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if created == nil {
		t.Fatal("no messageCreated of the user message on the live stream")
	}
	if b := created.GetBlocks(); len(b) != 3 || b[0].GetBlockType() != "text" || b[0].GetContent() != "look at these" {
		t.Fatalf("the created message's blocks: %v; want the text, then two files", b)
	}
	tb.checkFiles(t, "messageCreated", fileBlocks(created), notes, dot)

	// A new stream's snapshot, and GetConversation.
	later := subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: conv})
	later.mu.Lock()
	snap := later.received[0].GetSnapshot()
	later.mu.Unlock()
	var inSnapshot *convov1.Message
	for _, m := range snap.GetMessages() {
		if m.GetId() == userID {
			inSnapshot = m
		}
	}
	tb.checkFiles(t, "snapshot", fileBlocks(inSnapshot), notes, dot)
	for _, m := range tb.state(t, conv).Messages {
		if m.Id == userID {
			tb.checkFiles(t, "GetConversation", fileBlocks(m), notes, dot)
		}
	}
	var held int
	if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.message_files WHERE message_id = $1`, userID).Scan(&held); err != nil || held != 2 {
		t.Errorf("message_files holds %d rows of the message (%v), want 2", held, err)
	}
}

// TestMessageOfFilesOnly: a message may hold files and no text; a new
// conversation is titled after its first file.
func TestMessageOfFilesOnly(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOptions{files: true})
	dot := tb.upload(t, auth.LocalUser, "holiday photo.png", "image/png", pngBytes)
	res, err := tb.client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
		FileIds: []string{dot.ID.String()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	st := tb.state(t, res.Msg.ConversationId)
	if st.Conversation.Title != "holiday photo.png" {
		t.Errorf("title %q, want the file's name", st.Conversation.Title)
	}
	m := st.Messages[0]
	if len(m.Blocks) != 1 || m.Blocks[0].GetBlockType() != "file" || m.Blocks[0].GetPosition() != 0 {
		t.Fatalf("blocks %v, want one file block at position 0", m.Blocks)
	}
	tb.checkFiles(t, "GetConversation", fileBlocks(m), dot)
	// Without files, text is still required.
	_, err = tb.client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{Text: " "}))
	requireCode(t, err, connect.CodeInvalidArgument)
}

// TestSendMessageFileRefusals: file ids that are not the caller's uploads,
// malformed, repeated or too many are refused naming the id's index, and
// nothing is written.
func TestSendMessageFileRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOptions{files: true})
	first := tb.send(t, tb.client, "", "hello")
	conv := first.ConversationId
	tb.writeReply(t, first.PromptId, "hi")
	mine := tb.upload(t, auth.LocalUser, "mine.txt", "text/plain", []byte("mine"))
	theirs := tb.upload(t, "bob", "theirs.txt", "text/plain", []byte("bob's"))
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = tb.upload(t, auth.LocalUser, "f.txt", "text/plain", []byte{byte('a' + i)}).ID.String()
	}
	before := tb.countRows(t)
	for _, c := range []struct {
		name  string
		ids   []string
		code  connect.Code
		names string
	}{
		{"another user's file", []string{mine.ID.String(), theirs.ID.String()}, connect.CodeNotFound, "file_ids[1]"},
		{"an unknown file", []string{uuid.NewString()}, connect.CodeNotFound, "file_ids[0]"},
		{"not a UUID", []string{"photo.png"}, connect.CodeInvalidArgument, "fileIds[0]"},
		{"listed twice", []string{mine.ID.String(), mine.ID.String()}, connect.CodeInvalidArgument, "fileIds[1]"},
		{"too many", eleven, connect.CodeInvalidArgument, "at most 10"},
	} {
		_, err := tb.client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
			ConversationId: conv, Text: "see", FileIds: c.ids,
		}))
		ce := requireCode(t, err, c.code)
		if !strings.Contains(ce.Message(), c.names) {
			t.Errorf("%s: %q does not name %s", c.name, ce.Message(), c.names)
		}
	}
	// The store refuses a repeated id too (a SQL caller has no Go check).
	_, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: auth.LocalUser, ConversationID: uuid.MustParse(conv),
		Text: "see", ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)}, FileIDs: []uuid.UUID{mine.ID, mine.ID}})
	if conversation.ErrorCode(err) != conversation.Invalid || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("the store took a repeated file id: %v", err)
	}
	if after := tb.countRows(t); after != before {
		t.Errorf("refusals wrote: %s, was %s", after, before)
	}
}

// TestEditMessageFiles: a new version of a message holds the files its
// edit names, not the old version's.
func TestEditMessageFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOptions{files: true})
	a := tb.upload(t, auth.LocalUser, "a.txt", "text/plain", []byte("alpha"))
	b := tb.upload(t, auth.LocalUser, "b.txt", "text/plain", []byte("beta"))
	res, err := tb.client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "one", FileIds: []string{a.ID.String()}}))
	if err != nil {
		t.Fatal(err)
	}
	conv := res.Msg.ConversationId
	tb.writeReply(t, res.Msg.PromptId, "re: one")
	ed, err := tb.client.EditMessage(ctx, connect.NewRequest(&convov1.EditMessageRequest{
		ConversationId: conv, MessageId: res.Msg.UserMessageId, Text: "one, again", FileIds: []string{b.ID.String(), a.ID.String()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range tb.state(t, conv).Messages {
		if m.Id == ed.Msg.UserMessageId {
			tb.checkFiles(t, "the new version", fileBlocks(m), b, a)
			return
		}
	}
	t.Fatal("the new version is not on the active path")
}

package connectapi_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/auth"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// TestSearchFindsTextFiles checks SearchMessages end to end: a message
// holding a text file is found by the file's words, the result naming
// its file block, with a snippet of the file's text and the match
// highlighted; a text match names the text block.
func TestSearchFindsTextFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOptions{files: true})
	notes := tb.upload(t, auth.LocalUser, "birds.txt", "text/plain", []byte("Dawn chorus: the kookaburra laughs from the gum tree.\n"))
	withFile, err := tb.client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
		Text: "my notes", FileIds: []string{notes.ID.String()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	textual := tb.send(t, tb.client, "", "Did you hear the kookaburra?")

	blockOf := func(conversationID, messageID, blockType string) string {
		t.Helper()
		res, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conversationID}))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Msg.GetMessages() {
			for _, b := range m.GetBlocks() {
				if m.GetId() == messageID && b.GetBlockType() == blockType {
					return b.GetId()
				}
			}
		}
		t.Fatalf("no %s block in message %s", blockType, messageID)
		return ""
	}

	res, err := tb.client.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: "kookaburra"}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*convov1.SearchResult{}
	for _, r := range res.Msg.GetResults() {
		got[r.GetMessageId()] = r
	}
	if len(res.Msg.GetResults()) != 2 {
		t.Fatalf("results %v: want the message holding birds.txt and the text one", res.Msg.GetResults())
	}
	f := got[withFile.Msg.GetUserMessageId()]
	if f == nil {
		t.Fatal("the message holding birds.txt is not found by its file's word")
	}
	if want := blockOf(withFile.Msg.GetConversationId(), withFile.Msg.GetUserMessageId(), "file"); f.GetBlockId() != want {
		t.Errorf("the file match names block %q, want its file block %q", f.GetBlockId(), want)
	}
	if !strings.HasPrefix(f.GetSnippet(), "Dawn chorus: the kookaburra laughs from the gum tree") {
		t.Errorf("the file match's snippet is %q, want the file's text", f.GetSnippet())
	}
	if h := f.GetHighlights(); len(h) != 1 || string([]rune(f.GetSnippet())[h[0].GetStart():h[0].GetEnd()]) != "kookaburra" {
		t.Errorf("the file match's highlights are %v, want kookaburra", h)
	}
	tr := got[textual.GetUserMessageId()]
	if want := blockOf(textual.GetConversationId(), textual.GetUserMessageId(), "text"); tr.GetBlockId() != want {
		t.Errorf("the text match names block %q, want its text block %q", tr.GetBlockId(), want)
	}
}

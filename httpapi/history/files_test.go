package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestHistoryFiles: a user message's entry lists the files it holds, in
// order, each with a signed URL of its content that serves the bytes.
func TestHistoryFiles(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Files: true})
	ctx := context.Background()
	a, err := tb.Files.Upload(ctx, "local", "a.csv", "text/csv", strings.NewReader("x,y\n1,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tb.Files.Upload(ctx, "local", "b.txt", "text/plain", strings.NewReader("bee"))
	if err != nil {
		t.Fatal(err)
	}
	sent, err := tb.Store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "local", Text: "two files",
		ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)}, FileIDs: []uuid.UUID{a.ID, b.ID}})
	if err != nil {
		t.Fatal(err)
	}
	resp, cancel := apitest.Do(t, "GET", fmt.Sprintf("%s/v1/conversations/%s/history", tb.URL, sent.ConversationID), nil, nil)
	defer cancel()
	defer resp.Body.Close()
	var doc struct {
		Content []struct {
			ID, Text string
			Files    []struct{ ID, Filename, MediaType, Sha256, URL string }
		}
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&doc) != nil || len(doc.Content) == 0 {
		t.Fatalf("history: %s", resp.Status)
	}
	user := doc.Content[0]
	if user.Text != "two files" || len(user.Files) != 2 || user.Files[0].ID != a.ID.String() || user.Files[1].ID != b.ID.String() ||
		user.Files[0].Filename != "a.csv" || user.Files[1].Sha256 != b.SHA256 {
		t.Fatalf("the user entry %+v, want its text and a.csv then b.txt", user)
	}
	got, cancel2 := apitest.Do(t, "GET", tb.URL+user.Files[1].URL, nil, nil)
	defer cancel2()
	defer got.Body.Close()
	body, err := io.ReadAll(got.Body)
	if err != nil || got.StatusCode != http.StatusOK || string(body) != "bee" {
		t.Errorf("GET its url: %s %q %v", got.Status, body, err)
	}
}

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestMembersRoutes: the SSE, AG-UI, AI SDK and history routes on a
// shared conversation, as its owner (alice), a participant (pat), a
// viewer (vic), a removed member (rex), a stranger (sam), and anyone
// holding a live share link's token sent as a bearer token. Reads are
// every member's, sends the owner's and participants' (a viewer's is 403
// permission_denied naming the role); a removed member and a stranger get
// 404 not_found; a share token opens only the share's own reads, so here
// it is 401 unauthenticated. A refusal changes nothing.
func TestMembersRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.SetupAuth(t)
	var shareToken string
	shared := func(t *testing.T) uuid.UUID {
		t.Helper()
		s := tb.Send(t, "alice", uuid.Nil, "shared")
		tb.StartPrompt(t, s.PromptID)
		tb.CompletePrompt(t, s.PromptID)
		for user, role := range map[string]conversation.MemberRole{"pat": conversation.RoleParticipant, "vic": conversation.RoleViewer, "rex": conversation.RoleParticipant} {
			if _, err := tb.Store.AddMember(ctx, "alice", s.ConversationID, user, role); err != nil {
				t.Fatal(err)
			}
		}
		if err := tb.Store.RemoveMember(ctx, "alice", s.ConversationID, "rex"); err != nil {
			t.Fatal(err)
		}
		_, token, err := tb.Store.CreateShare(ctx, conversation.CreateShareParams{
			CallerID: "alice", ConversationID: s.ConversationID, Mode: conversation.ShareLive, IncludeTools: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		shareToken = token
		return s.ConversationID
	}
	jsonBody := func(v any) *bytes.Reader {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.NewReader(b)
	}
	routes := []struct {
		name, method string
		write        bool
		path         func(id uuid.UUID) string
		body         func(id uuid.UUID) *bytes.Reader
	}{
		{"SSE events", "GET", false, func(id uuid.UUID) string { return fmt.Sprintf("/v1/conversations/%s/events", id) }, nil},
		{"AG-UI follow", "GET", false, func(id uuid.UUID) string { return fmt.Sprintf("/v1/conversations/%s/agui", id) }, nil},
		{"history", "GET", false, func(id uuid.UUID) string { return fmt.Sprintf("/v1/conversations/%s/history", id) }, nil},
		{"AI SDK messages", "GET", false, func(id uuid.UUID) string { return fmt.Sprintf("/v1/ai-sdk/chat/%s/messages", id) }, nil},
		{"AI SDK send", "POST", true, func(uuid.UUID) string { return "/v1/ai-sdk/chat" }, func(id uuid.UUID) *bytes.Reader {
			return jsonBody(map[string]any{"id": id.String(), "trigger": "submit-message", "messages": []any{map[string]any{
				"id": uuid.NewString(), "role": "user", "parts": []any{map[string]any{"type": "text", "text": "hi"}}}}})
		}},
		{"AG-UI run", "POST", true, func(uuid.UUID) string { return "/v1/agui" }, func(id uuid.UUID) *bytes.Reader {
			return jsonBody(map[string]any{"threadId": id.String(), "runId": uuid.NewString(),
				"messages": []any{map[string]any{"id": uuid.NewString(), "role": "user", "content": "hi"}},
				"tools":    []any{}, "context": []any{}, "state": map[string]any{}, "forwardedProps": map[string]any{}})
		}},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			for _, user := range []string{"alice", "pat", "vic", "rex", "sam", "share token"} {
				id := shared(t)
				want, code := http.StatusOK, ""
				switch {
				case user == "share token":
					want, code = http.StatusUnauthorized, "unauthenticated"
				case user == "rex" || user == "sam":
					want, code = http.StatusNotFound, "not_found"
				case user == "vic" && r.write:
					want, code = http.StatusForbidden, "permission_denied"
				}
				before := tb.State(t, "alice", id)
				header := apitest.Bearer(apitest.TokenFor(t, user))
				if user == "share token" {
					header = apitest.Bearer(shareToken)
				}
				var body *bytes.Reader
				if r.body != nil {
					body = r.body(id)
					header.Set("Content-Type", "application/json")
				}
				var resp *http.Response
				var cancel context.CancelFunc
				if body != nil {
					resp, cancel = apitest.Do(t, r.method, tb.URL+r.path(id), header, body)
				} else {
					resp, cancel = apitest.Do(t, r.method, tb.URL+r.path(id), header, nil)
				}
				if resp.StatusCode != want {
					_, msg := apitest.ErrorBody(t, resp)
					t.Errorf("%s as %s: %s (%s), want %d", r.name, user, resp.Status, msg, want)
					cancel()
					continue
				}
				if code != "" {
					gotCode, msg := apitest.ErrorBody(t, resp)
					if gotCode != code {
						t.Errorf("%s as %s: code %s (%s), want %s", r.name, user, gotCode, msg, code)
					}
					if code == "permission_denied" && !strings.Contains(msg, "a viewer may not") {
						t.Errorf("%s as %s: %q does not name the role", r.name, user, msg)
					}
					after := tb.State(t, "alice", id)
					if after.Seq != before.Seq || len(after.Messages) != len(before.Messages) {
						t.Errorf("%s as %s was refused and changed the conversation: seq %d → %d", r.name, user, before.Seq, after.Seq)
					}
				} else {
					resp.Body.Close()
				}
				cancel()
			}
		})
	}
}

// TestMembersFiles: the file routes around a shared conversation, as its
// owner (alice), a participant (pat), a viewer (vic), a removed member
// (rex), a stranger (sam), and a live share link's token sent as a
// bearer token. The conversation holds alice's file and pat's (each sent
// by its uploader).
//
//   - POST /v1/files: every signed-in user uploads, and the file is the
//     uploader's alone (GET by id: 200 for the uploader, 404 for alice);
//     the share token is 401 unauthenticated, storing nothing.
//   - GET /v1/files/{id} and /content with a bearer token: the uploader's
//     only. Everyone else, the conversation's owner and members included,
//     is 404 not_found (as for no file); the share token 401. Nothing
//     changes.
//   - The signed URL a message's file block carries: every user who can
//     read the conversation gets it (GetConversation; the share link's
//     reader from GET /v1/shares/{token}), a removed member and a stranger
//     do not (not_found); and whoever holds it reads the bytes, with no
//     Authorization, with any user's token, or with the share token: the
//     signature decides.
func TestMembersFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Files: true, Connect: true})
	users := []string{"alice", "pat", "vic", "rex", "sam", "share token"}
	rows := func() string {
		t.Helper()
		var s string
		err := tb.Pool.QueryRow(ctx, `SELECT concat_ws(',', (SELECT count(*) FROM convo.files), (SELECT count(*) FROM convo.file_blobs),
			(SELECT count(*) FROM convo.messages), (SELECT count(*) FROM convo.events), (SELECT count(*) FROM convo.members))`).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// upload posts text as a file; f is its JSON when it was created.
	upload := func(header http.Header, name, text string) (resp *http.Response, body []byte, f map[string]any) {
		t.Helper()
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		pw, err := mw.CreateFormFile("file", name)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write([]byte(text))
		mw.Close()
		h := header.Clone()
		h.Set("Content-Type", mw.FormDataContentType())
		resp, cancel := apitest.Do(t, http.MethodPost, tb.URL+"/v1/files", h, &form)
		defer cancel()
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusCreated {
			if err := json.Unmarshal(body, &f); err != nil {
				t.Fatal(err)
			}
		}
		return resp, body, f
	}
	get := func(header http.Header, path string) (*http.Response, []byte) {
		t.Helper()
		resp, cancel := apitest.Do(t, http.MethodGet, tb.URL+path, header, nil)
		defer cancel()
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	errorCode := func(b []byte) string {
		var e struct{ Code string }
		_ = json.Unmarshal(b, &e)
		return e.Code
	}

	// The conversation: alice's message with alice's file, pat's with
	// pat's; pat and vic members, rex removed; a live share.
	alicesText, patsText := "alice's notes on the okapi", "pat's notes on the quokka"
	_, _, af := upload(apitest.Bearer(apitest.TokenFor(t, "alice")), "alice.txt", alicesText)
	_, _, pf := upload(apitest.Bearer(apitest.TokenFor(t, "pat")), "pat.txt", patsText)
	if af == nil || pf == nil {
		t.Fatal("the fixture's uploads failed")
	}
	aliceFile, patFile := uuid.MustParse(af["id"].(string)), uuid.MustParse(pf["id"].(string))
	sent, err := tb.Store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "alice", Text: "my file", ModelConfigs: []json.RawMessage{json.RawMessage("{}")}, FileIDs: []uuid.UUID{aliceFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	conv := sent.ConversationID
	tb.StartPrompt(t, sent.PromptIDs[0])
	tb.CompletePrompt(t, sent.PromptIDs[0])
	for user, role := range map[string]conversation.MemberRole{"pat": conversation.RoleParticipant, "vic": conversation.RoleViewer, "rex": conversation.RoleParticipant} {
		if _, err := tb.Store.AddMember(ctx, "alice", conv, user, role); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.Store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "pat", ConversationID: conv, Text: "mine", ModelConfigs: []json.RawMessage{json.RawMessage("{}")}, FileIDs: []uuid.UUID{patFile},
	}); err != nil {
		t.Fatalf("pat sends a message holding pat's file: %v", err)
	}
	if err := tb.Store.RemoveMember(ctx, "alice", conv, "rex"); err != nil {
		t.Fatal(err)
	}
	_, shareToken, err := tb.Store.CreateShare(ctx, conversation.CreateShareParams{CallerID: "alice", ConversationID: conv, Mode: conversation.ShareLive})
	if err != nil {
		t.Fatal(err)
	}
	header := func(user string) http.Header {
		if user == "share token" {
			return apitest.Bearer(shareToken)
		}
		return apitest.Bearer(apitest.TokenFor(t, user))
	}
	contents := map[uuid.UUID]string{aliceFile: alicesText, patFile: patsText}
	uploader := map[uuid.UUID]string{aliceFile: "alice", patFile: "pat"}

	t.Run("Upload", func(t *testing.T) {
		for _, user := range users {
			before := rows()
			resp, b, f := upload(header(user), "mine.txt", "uploaded by "+user)
			if user == "share token" {
				if resp.StatusCode != http.StatusUnauthorized || errorCode(b) != "unauthenticated" {
					t.Errorf("upload with the share token: %s %s, want 401 unauthenticated", resp.Status, b)
				}
				if after := rows(); after != before {
					t.Errorf("a refused upload changed the database: %s -> %s", before, after)
				}
				continue
			}
			if f == nil {
				t.Errorf("%s's upload: %s %s, want 201", user, resp.Status, b)
				continue
			}
			path := "/v1/files/" + f["id"].(string)
			if resp, _ := get(header(user), path); resp.StatusCode != http.StatusOK {
				t.Errorf("%s reads back their upload: %s", user, resp.Status)
			}
			if user != "alice" {
				if resp, b := get(header("alice"), path); resp.StatusCode != http.StatusNotFound || errorCode(b) != "not_found" {
					t.Errorf("alice reads %s's upload: %s %s, want 404 not_found", user, resp.Status, b)
				}
			}
		}
	})

	t.Run("GetWithAToken", func(t *testing.T) {
		for _, file := range []uuid.UUID{aliceFile, patFile} {
			for _, path := range []string{"/v1/files/" + file.String(), "/v1/files/" + file.String() + "/content"} {
				for _, user := range users {
					before := rows()
					resp, b := get(header(user), path)
					switch {
					case user == uploader[file]:
						if resp.StatusCode != http.StatusOK {
							t.Errorf("%s GET %s (their file): %s", user, path, resp.Status)
						}
						if strings.HasSuffix(path, "/content") && string(b) != contents[file] {
							t.Errorf("%s GET %s: %q, want the file's bytes", user, path, b)
						}
					case user == "share token":
						if resp.StatusCode != http.StatusUnauthorized || errorCode(b) != "unauthenticated" {
							t.Errorf("GET %s with the share token: %s %s, want 401 unauthenticated", path, resp.Status, b)
						}
					default:
						if resp.StatusCode != http.StatusNotFound || errorCode(b) != "not_found" {
							t.Errorf("%s GET %s (%s's file): %s %s, want 404 not_found", user, path, uploader[file], resp.Status, b)
						}
					}
					if after := rows(); after != before {
						t.Errorf("%s GET %s changed the database: %s -> %s", user, path, before, after)
					}
				}
			}
		}
	})

	t.Run("SignedURL", func(t *testing.T) {
		client := convov1connect.NewConversationServiceClient(http.DefaultClient, tb.URL)
		// urls are the signed URLs of the conversation's file blocks as
		// user reads the conversation, by file id.
		urls := func(user string) (map[string]string, error) {
			var messages []*convov1.Message
			if user == "share token" {
				resp, b := get(nil, "/v1/shares/"+shareToken)
				if resp.StatusCode != http.StatusOK {
					return nil, fmt.Errorf("GET /v1/shares/{token}: %s %s", resp.Status, b)
				}
				var shared convov1.GetSharedConversationResponse
				if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &shared); err != nil {
					t.Fatal(err)
				}
				messages = shared.Messages
			} else {
				req := connect.NewRequest(&convov1.GetConversationRequest{ConversationId: conv.String()})
				req.Header().Set("Authorization", "Bearer "+apitest.TokenFor(t, user))
				res, err := client.GetConversation(ctx, req)
				if err != nil {
					return nil, err
				}
				messages = res.Msg.Messages
			}
			out := map[string]string{}
			for _, m := range messages {
				for _, b := range m.Blocks {
					if f := b.GetFile(); f != nil {
						out[f.GetId()] = f.GetUrl()
					}
				}
			}
			return out, nil
		}
		held := map[uuid.UUID]string{}
		for _, user := range users {
			got, err := urls(user)
			if user == "rex" || user == "sam" {
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Errorf("%s reads the conversation: %v, want not_found (no URL)", user, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s reads the conversation: %v", user, err)
			}
			for file := range contents {
				u := got[file.String()]
				if !strings.HasPrefix(u, "/v1/files/"+file.String()+"/content?") {
					t.Fatalf("%s's view of %s's file: URL %q", user, uploader[file], u)
				}
				held[file] = u
			}
		}
		// Whoever holds a URL reads the bytes, whatever else they send.
		for file, u := range held {
			for _, user := range append([]string{"nobody"}, users...) {
				var h http.Header
				if user != "nobody" {
					h = header(user)
				}
				before := rows()
				if resp, b := get(h, u); resp.StatusCode != http.StatusOK || string(b) != contents[file] {
					t.Errorf("%s's file's signed URL as %s: %s %q", uploader[file], user, resp.Status, b)
				}
				if after := rows(); after != before {
					t.Errorf("reading a signed URL changed the database: %s -> %s", before, after)
				}
			}
		}
	})
}

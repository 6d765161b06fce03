package aisdk_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// fileChat is a useChat request of one user message: text, then file parts.
func fileChat(chatID, text string, fileParts ...map[string]any) map[string]any {
	parts := []any{map[string]any{"type": "text", "text": text}}
	for _, p := range fileParts {
		parts = append(parts, p)
	}
	return map[string]any{"id": chatID, "trigger": "submit-message",
		"messages": []any{map[string]any{"id": uuid.NewString(), "role": "user", "parts": parts}}}
}

func dataURL(mediaType string, data []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// fileCount counts the files kept and the messages that hold one.
func fileCount(t testing.TB, tb *apitest.Bundle) string {
	t.Helper()
	var s string
	if err := tb.Pool.QueryRow(context.Background(), `SELECT concat_ws(',', (SELECT count(*) FROM convo.files),
		(SELECT count(*) FROM convo.message_files), (SELECT count(*) FROM convo.messages))`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAISDKFiles: useChat's sendMessage({text, files}) posts FileUIParts
// with data URLs; convo stores each as a file the user message holds,
// and /messages returns them with convo's signed URLs, never data URLs,
// whose content is the bytes sent. A part naming one of convo's URLs is
// the file it names.
func TestAISDKFiles(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Files: true, Workers: true})
	chat := uuid.NewString()
	notes := []byte("first line\nsecond line\n")
	openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, fileChat(chat, "read this",
		map[string]any{"type": "file", "mediaType": "text/plain", "filename": "notes.txt", "url": dataURL("text/plain", notes)})).rest(t)

	loaded := uiMessagesOf(t, tb.URL, nil, chat)
	parts := loaded[0]["parts"].([]any)
	if len(parts) != 2 {
		t.Fatalf("user message parts %v, want text and file", parts)
	}
	file := parts[1].(map[string]any)
	url, _ := file["url"].(string)
	if mt, _ := file["mediaType"].(string); file["type"] != "file" || !strings.HasPrefix(mt, "text/plain") || file["filename"] != "notes.txt" ||
		!strings.HasPrefix(url, "/v1/files/") || strings.Contains(url, "data:") {
		t.Fatalf("file part %v, want notes.txt with convo's URL", file)
	}
	// The signed URL serves the bytes, without a bearer token.
	resp, cancel := apitest.Do(t, "GET", tb.URL+url, nil, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusOK || string(body) != string(notes) {
		t.Fatalf("GET %s: %s %q, want the bytes sent", url, resp.Status, body)
	}
	sum := sha256.Sum256(notes)
	if resp.Header.Get("ETag") != `"`+hex.EncodeToString(sum[:])+`"` {
		t.Errorf("ETag %s, want the sha256 of the bytes sent", resp.Header.Get("ETag"))
	}

	// A later message may name the same file by its URL: no new file.
	before := fileCount(t, tb)
	openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, fileChat(chat, "and again",
		map[string]any{"type": "file", "mediaType": "text/plain", "filename": "notes.txt", "url": url})).rest(t)
	var files, held int
	if err := tb.Pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM convo.files), (SELECT count(*) FROM convo.message_files)`).Scan(&files, &held); err != nil {
		t.Fatal(err)
	}
	if files != 1 || held != 2 {
		t.Errorf("after naming the file by its URL: %d files, %d held (was %s), want 1 file held twice", files, held, before)
	}
}

// TestAISDKFileRefusals: a file part convo cannot take is refused naming
// the part, and nothing is written.
func TestAISDKFileRefusals(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Files: true})
	before := fileCount(t, tb)
	for _, c := range []struct {
		name string
		part map[string]any
		says string
	}{
		{"a URL elsewhere", map[string]any{"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"}, "messages[0].parts[1].url"},
		{"not base64", map[string]any{"type": "file", "mediaType": "text/plain", "url": "data:text/plain;base64,@@@"}, "not valid base64"},
		{"HTML declared as an image", map[string]any{"type": "file", "mediaType": "image/png", "filename": "x.png",
			"url": dataURL("image/png", []byte("<!DOCTYPE html><html><script>alert(1)</script></html>"))}, "messages[0].parts[1]: mediaType"},
		{"a path in the name", map[string]any{"type": "file", "mediaType": "text/plain", "filename": "../etc/passwd",
			"url": dataURL("text/plain", []byte("x"))}, "filename"},
		{"empty", map[string]any{"type": "file", "mediaType": "text/plain", "url": "data:text/plain;base64,"}, "empty"},
	} {
		resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/ai-sdk/chat", http.Header{"Content-Type": {"application/json"}},
			strings.NewReader(apitest.Marshal(t, fileChat(uuid.NewString(), "see", c.part))))
		code, msg := apitest.ErrorBody(t, resp)
		cancel()
		if resp.StatusCode != http.StatusBadRequest || code != "invalid_argument" || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %s %q, want 400 naming %s", c.name, resp.Status, code, msg, c.says)
		}
	}
	if after := fileCount(t, tb); after != before {
		t.Errorf("refusals wrote: %s, was %s", after, before)
	}
}

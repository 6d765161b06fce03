package agui_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// pngBytes is a 1×1 PNG.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// withContent is runInput with one user message of content parts.
func withContent(thread, run, messageID string, parts ...any) map[string]any {
	in := runInput(thread, run)
	in["messages"] = []map[string]any{{"id": messageID, "role": "user", "content": parts}}
	return in
}

// recordFiles runs a user message holding an image sent as base64 data
// (recorded as "files" for the verifier, which checks its events against
// AG-UI's schemas): convo stores the image as a file the message holds,
// and the run's MESSAGES_SNAPSHOT shows the message as a text part and an
// image part whose source is the file's signed URL, which serves the
// bytes. The message sent again as the snapshot gave it (convo's id, the
// image named by its URL) is the message as it is: a rerun, refused.
func recordFiles(t *testing.T, tb *apitest.Bundle, dir string) {
	thread, messageID := uuid.NewString(), uuid.NewString()
	text := map[string]any{"type": "text", "text": "What is in this picture?"}
	post := openAGUI(t, "POST", tb.URL+"/v1/agui", nil, withContent(thread, "run-files", messageID, text,
		map[string]any{"type": "image", "source": map[string]any{"type": "data", "value": base64.StdEncoding.EncodeToString(pngBytes),
			"mimeType": "image/png"}, "metadata": map[string]any{"filename": "dot.png"}}))
	events := post.Until(t, "RUN_FINISHED", "RUN_ERROR")
	post.C.Ended(t)
	post.save(t, dir, "files")
	if events[1]["type"] != "MESSAGES_SNAPSHOT" {
		t.Fatalf("the run starts %v", typeList(events))
	}
	user := events[1]["messages"].([]any)[0].(map[string]any)
	parts, _ := user["content"].([]any)
	if len(parts) != 2 || parts[0].(map[string]any)["text"] != "What is in this picture?" {
		t.Fatalf("the user message's content %v, want a text part and an image part", user["content"])
	}
	image := parts[1].(map[string]any)
	source, _ := image["source"].(map[string]any)
	url, _ := source["value"].(string)
	meta, _ := image["metadata"].(map[string]any)["convo"].(map[string]any)
	if image["type"] != "image" || source["type"] != "url" || source["mimeType"] != "image/png" ||
		!strings.HasPrefix(url, "/v1/files/") || meta["filename"] != "dot.png" {
		t.Fatalf("image part %v, want the file's signed URL", image)
	}
	resp, cancel := apitest.Do(t, "GET", tb.URL+url, nil, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusOK || string(body) != string(pngBytes) || resp.Header.Get("Content-Disposition") != "inline" &&
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "inline") {
		t.Fatalf("GET the image: %s (%s), %d bytes; want the PNG inline", resp.Status, resp.Header.Get("Content-Disposition"), len(body))
	}
	again, cancel := apitest.Do(t, "POST", tb.URL+"/v1/agui", http.Header{"Content-Type": {"application/json"}},
		strings.NewReader(apitest.Marshal(t, withContent(thread, "run-again", user["id"].(string), text,
			map[string]any{"type": "image", "source": map[string]any{"type": "url", "value": url, "mimeType": "image/png"}}))))
	defer cancel()
	if code, msg := apitest.ErrorBody(t, again); code != "failed_precondition" || !strings.Contains(msg, "already in the conversation") {
		t.Errorf("the same message again: %s %s %q, want a refused rerun", again.Status, code, msg)
	}
}

// TestAGUIFileRefusals: a media part convo cannot take is refused naming
// it, and nothing is written.
func TestAGUIFileRefusals(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Files: true})
	for _, c := range []struct {
		name string
		part map[string]any
		says string
	}{
		{"a URL elsewhere", map[string]any{"type": "image", "source": map[string]any{"type": "url", "value": "https://example.com/a.png"}},
			"messages[0].content[1].source.value"},
		{"no source", map[string]any{"type": "document"}, "messages[0].content[1].source"},
		{"not base64", map[string]any{"type": "image", "source": map[string]any{"type": "data", "value": "@@", "mimeType": "image/png"}}, "base64"},
		{"a lying type", map[string]any{"type": "image", "source": map[string]any{"type": "data", "mimeType": "image/png",
			"value": base64.StdEncoding.EncodeToString([]byte("<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"))}},
			"messages[0].content[1]: mediaType"},
		{"a file id not a UUID", map[string]any{"type": "document", "source": map[string]any{"type": "file", "value": "file-abc"}},
			"messages[0].content[1].source.value"},
		{"an unknown part", map[string]any{"type": "hologram"}, "messages[0].content[1]"},
	} {
		resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/agui", http.Header{"Content-Type": {"application/json"}},
			strings.NewReader(apitest.Marshal(t, withContent(uuid.NewString(), "r", uuid.NewString(),
				map[string]any{"type": "text", "text": "see"}, c.part))))
		code, msg := apitest.ErrorBody(t, resp)
		cancel()
		if resp.StatusCode != http.StatusBadRequest || code != "invalid_argument" || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %s %q, want 400 naming %s", c.name, resp.Status, code, msg, c.says)
		}
	}
	var n int
	if err := tb.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM convo.files) + (SELECT count(*) FROM convo.messages)`).Scan(&n); err != nil || n != 0 {
		t.Errorf("refusals wrote %d files and messages (%v)", n, err)
	}
}

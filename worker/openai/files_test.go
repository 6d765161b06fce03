package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/convo-dev/convo/worker"
)

// bytesFile is a file of the context whose bytes are data.
func bytesFile(name, mediaType string, data []byte) worker.File {
	return worker.NewFile(worker.File{ID: name, Filename: name, MediaType: mediaType, Size: int64(len(data))},
		func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// TestRequestFiles checks the content parts of a user message holding
// files: an image as image_url and a PDF as a file part (base64 data
// URLs), a text file as text (cut past MaxTextFileBytes, saying so), JSON
// as text, and as a line naming it: another type, an image past
// MaxFileBytes, a file whose bytes the worker cannot reach.
func TestRequestFiles(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter) { events(w, chunk(`{"content":"ok"}`, "stop")) })
	png := []byte("\x89PNG\r\n\x1a\n-image-bytes")
	pdf := []byte("%PDF-1.7\n-pdf-bytes")
	long := strings.Repeat("é", 40) // 80 bytes: cut at 51 falls inside a character
	req := worker.Request{Messages: []worker.Message{
		{Role: worker.RoleUser, Text: "no files"},
		{Role: worker.RoleUser, Text: "what are these?", Files: []worker.File{
			bytesFile("photo.png", "image/png", png),
			bytesFile("scan.pdf", "application/pdf", pdf),
			bytesFile("notes.txt", "text/plain; charset=utf-8", []byte("first line\nsecond")),
			bytesFile("long.txt", "text/plain; charset=utf-8", []byte(long)),
			bytesFile("data.json", "application/json", []byte(`{"a":1}`)),
			bytesFile("archive.zip", "application/zip", []byte("PK\x03\x04")),
			bytesFile("huge.png", "image/png", bytes.Repeat([]byte{1}, 101)),
			{ID: "s3", Filename: "far.png", MediaType: "image/png", Size: 10, Storage: "s3", BlobID: "b"},
		}},
		{Role: worker.RoleUser, Files: []worker.File{bytesFile("only.txt", "text/plain", []byte("just a file"))}},
	}}
	if _, err := run(t, s, Options{Model: "m", MaxFileBytes: 100, MaxTextFileBytes: 51}, req); err != nil {
		t.Fatal(err)
	}
	msgs := s.bodies[0]["messages"].([]any)
	if c := msgs[0].(map[string]any)["content"]; c != "no files" {
		t.Errorf("a message without files: content %v; want the text as a string", c)
	}
	got, _ := json.Marshal(msgs[1].(map[string]any)["content"])
	b64 := base64.StdEncoding.EncodeToString
	want, _ := json.Marshal([]any{
		map[string]any{"type": "text", "text": "what are these?"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + b64(png)}},
		map[string]any{"type": "file", "file": map[string]any{"filename": "scan.pdf", "file_data": "data:application/pdf;base64," + b64(pdf)}},
		map[string]any{"type": "text", "text": "The user attached notes.txt (text/plain, 17 B). Its content:\n\nfirst line\nsecond"},
		map[string]any{"type": "text", "text": "The user attached long.txt (text/plain, 80 B). Its first 50 B (the rest is cut):\n\n" + strings.Repeat("é", 25)},
		map[string]any{"type": "text", "text": "The user attached data.json (application/json, 7 B). Its content:\n\n{\"a\":1}"},
		map[string]any{"type": "text", "text": "The user attached archive.zip (application/zip, 4 B); its content is not shown to you (this worker sends images, PDFs and text)."},
		map[string]any{"type": "text", "text": "The user attached huge.png (image/png, 101 B); it is not shown to you: it is larger than the 100 B this worker sends."},
		map[string]any{"type": "text", "text": "The user attached far.png (image/png, 10 B); its content is not available to this worker."},
	})
	if string(got) != string(want) {
		t.Errorf("content parts\n%s\nwant\n%s", got, want)
	}
	got, _ = json.Marshal(msgs[2].(map[string]any)["content"])
	if want := `[{"text":"The user attached only.txt (text/plain, 11 B). Its content:\n\njust a file","type":"text"}]`; string(got) != want {
		t.Errorf("a message of files only: %s; want %s", got, want)
	}
}

// TestRequestFileReadFails: a file that cannot be read fails the round
// before anything is sent, with the read's error (not the server's).
func TestRequestFileReadFails(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter) { events(w, chunk(`{"content":"ok"}`, "stop")) })
	broken := worker.NewFile(worker.File{ID: "f", Filename: "notes.txt", MediaType: "text/plain", Size: 5},
		func(context.Context) (io.ReadCloser, error) {
			return nil, errors.New("read file f (notes.txt): connection lost")
		})
	_, err := run(t, s, Options{Model: "m"}, worker.Request{Messages: []worker.Message{
		{Role: worker.RoleUser, Files: []worker.File{broken}},
	}})
	if err == nil || err.Error() != "read file f (notes.txt): connection lost" || s.requests != 0 {
		t.Errorf("err %v after %d requests; want the read's error, no request", err, s.requests)
	}
}

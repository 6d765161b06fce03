package files_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// fileJSON is the JSON the file routes answer.
type fileJSON struct {
	ID        string    `json:"id"`
	Filename  string    `json:"filename"`
	MediaType string    `json:"mediaType"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"createdAt"`
	URL       string    `json:"url"`
}

// setup starts a server with the file routes and authentication.
func setup(t *testing.T, opts ...apitest.Options) *apitest.Bundle {
	t.Helper()
	var o apitest.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Files = true
	o.Verifier = apitest.Verifier()
	return apitest.Setup(t, o)
}

// pngBytes is a PNG signature and header followed by n-33 random bytes:
// mimetype sniffs it as image/png.
func pngBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	copy(b, "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde")
	return b
}

// form is a multipart body with one part named "file" holding data,
// declared as filename and contentType (none when empty).
func form(t *testing.T, filename, contentType string, data []byte) (body *bytes.Buffer, formType string) {
	t.Helper()
	body = &bytes.Buffer{}
	mw := multipart.NewWriter(body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, filename))
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	pw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	pw.Write(data)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return body, mw.FormDataContentType()
}

// request sends method url with the user's token (none when user is
// empty) and the extra headers, and returns the response, its body read.
func request(t *testing.T, method, url, user string, header http.Header, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+apitest.TokenFor(t, user))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, url, err)
	}
	return resp, b
}

// upload posts data as user's file and returns its JSON, failing the test
// unless it is created.
func upload(t *testing.T, tb *apitest.Bundle, user, filename, contentType string, data []byte) fileJSON {
	t.Helper()
	body, ct := form(t, filename, contentType, data)
	resp, b := request(t, http.MethodPost, tb.URL+"/v1/files", user, http.Header{"Content-Type": {ct}}, body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload %s: %s %s", filename, resp.Status, b)
	}
	var f fileJSON
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("upload answer %s: %v", b, err)
	}
	return f
}

// wantError checks an error answer: its status, JSON code, and that its
// message says want.
func wantError(t *testing.T, what string, resp *http.Response, body []byte, status int, code, want string) {
	t.Helper()
	var e struct{ Code, Message string }
	if resp.StatusCode != status || json.Unmarshal(body, &e) != nil || e.Code != code || !strings.Contains(e.Message, want) {
		t.Errorf("%s: %s %s; want %d %s saying %q", what, resp.Status, body, status, code, want)
	}
}

// stored counts the rows of the file tables: an upload refused must
// leave none.
func stored(t *testing.T, tb *apitest.Bundle) string {
	t.Helper()
	var files, blobs, chunks int
	err := tb.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM convo.files),
		(SELECT count(*) FROM convo.file_blobs), (SELECT count(*) FROM convo.file_chunks)`).Scan(&files, &blobs, &chunks)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d files, %d blobs, %d chunks", files, blobs, chunks)
}

const nothingStored = "0 files, 0 blobs, 0 chunks"

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

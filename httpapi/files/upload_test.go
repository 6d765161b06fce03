package files_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// endless is a file body that never ends: zeros after a PNG header.
type endless struct{ sent atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	e.sent.Add(int64(len(p)))
	return len(p), nil
}

// TestUploadOverTheLimit checks that a file larger than MaxFileBytes is
// refused 413 naming the limit and its setting, and stores nothing: at
// once when the body's Content-Length says 1 GB, and, for a body sent
// without one that would never end, as soon as the limit is passed while
// it is read.
func TestUploadOverTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	tb := setup(t, apitest.Options{FileLimits: files.Limits{MaxFileBytes: limit}})
	const want = "larger than 1048576 bytes (1 MiB), the most a file may hold (CONVO_FILE_MAX_BYTES)"

	body := &endless{}
	req, err := http.NewRequest(http.MethodPost, tb.URL+"/v1/files", io.LimitReader(body, 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 1 << 30
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	req.Header.Set("Authorization", "Bearer "+apitest.TokenFor(t, "alice"))
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantError(t, "Content-Length of 1 GB", resp, b, http.StatusRequestEntityTooLarge, "invalid_argument", want)
	} else {
		t.Errorf("Content-Length of 1 GB: %v; want a 413", err)
	}

	// A multipart body of an endless file, chunked.
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	file := &endless{}
	go func() {
		part, err := mw.CreateFormFile("file", "huge.bin")
		if err == nil {
			_, err = io.Copy(part, io.LimitReader(file, 1<<30))
		}
		pw.CloseWithError(err)
	}()
	start := time.Now()
	resp, b := request(t, http.MethodPost, tb.URL+"/v1/files", "alice", http.Header{"Content-Type": {mw.FormDataContentType()}}, pr)
	pr.Close()
	wantError(t, "endless body", resp, b, http.StatusRequestEntityTooLarge, "invalid_argument", want)
	if took, sent := time.Since(start), file.sent.Load(); took > 20*time.Second || sent > 64<<20 {
		t.Errorf("the refusal took %v and %d bytes sent; want it as the limit is passed", took, sent)
	}
	if got := stored(t, tb); got != nothingStored {
		t.Errorf("after refused uploads: %s", got)
	}
	// A file of exactly the limit is taken.
	f := upload(t, tb, "alice", "max.png", "", pngBytes(t, limit))
	if f.Size != limit {
		t.Errorf("a file of the limit: size %d", f.Size)
	}
}

// TestSlowUploadIsCut checks that an upload whose body does not arrive
// within the body timeout is answered 408 and stores nothing, though
// part of the file came.
func TestSlowUploadIsCut(t *testing.T) {
	t.Parallel()
	tb := setup(t, apitest.Options{BodyTimeout: 500 * time.Millisecond})
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		part, err := mw.CreateFormFile("file", "slow.png")
		if err == nil {
			_, err = part.Write(pngBytes(t, 300<<10)) // more than one chunk
		}
		if err == nil {
			<-done // then nothing more
		}
		pw.CloseWithError(io.ErrUnexpectedEOF)
	}()
	start := time.Now()
	resp, b := request(t, http.MethodPost, tb.URL+"/v1/files", "alice", http.Header{"Content-Type": {mw.FormDataContentType()}}, pr)
	close(done)
	wantError(t, "slow body", resp, b, http.StatusRequestTimeout, "deadline_exceeded", "did not arrive within 500ms")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("cut after %v", took)
	}
	if got := stored(t, tb); got != nothingStored {
		t.Errorf("after a slow upload: %s", got)
	}
}

// TestUploadRefusals checks each refusal of an upload's input: a clear
// error naming what is wrong, and nothing stored.
func TestUploadRefusals(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	html := []byte("<!DOCTYPE html><html><body>hi</body></html>")
	post := func(contentType string, body io.Reader) (*http.Response, []byte) {
		h := http.Header{}
		if contentType != "" {
			h.Set("Content-Type", contentType)
		}
		return request(t, http.MethodPost, tb.URL+"/v1/files", "alice", h, body)
	}
	for _, c := range []struct {
		name, filename, contentType string
		data                        []byte
		status                      int
		want                        string
	}{
		{"slash", "../etc/passwd.png", "", pngBytes(t, 100), http.StatusBadRequest, "filename"},
		{"backslash", `a\b.png`, "", pngBytes(t, 100), http.StatusBadRequest, "filename"},
		// A raw control character breaks the part's header itself.
		{"control character", "a\x01b.png", "", pngBytes(t, 100), http.StatusBadRequest, "multipart"},
		{"too long", strings.Repeat("a", 256) + ".png", "", pngBytes(t, 100), http.StatusBadRequest, "filename"},
		{"empty", "empty.txt", "", nil, http.StatusBadRequest, "empty"},
		{"HTML as an image", "x.png", "image/png", html, http.StatusBadRequest, `declared "image/png", but the bytes are "text/html`},
	} {
		body, ct := form(t, c.filename, c.contentType, c.data)
		resp, b := post(ct, body)
		wantError(t, c.name, resp, b, c.status, "invalid_argument", c.want)
	}
	for _, ct := range []string{"", "application/json", "text/plain", "multipart/form-data", "multipart/mixed; boundary=x"} {
		resp, b := post(ct, strings.NewReader(`{"file":"x"}`))
		wantError(t, "Content-Type "+ct, resp, b, http.StatusUnsupportedMediaType, "invalid_argument", "want multipart/form-data")
	}
	// A control character in RFC 2231's encoded form reaches the check.
	resp, b := post("multipart/form-data; boundary=x", strings.NewReader("--x\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''a%01b.png\r\n\r\n\x89PNG\r\n--x--\r\n"))
	wantError(t, "encoded control character", resp, b, http.StatusBadRequest, "invalid_argument", "filename")
	// A form without a file part.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("note", "no file here")
	mw.Close()
	resp, b = post(mw.FormDataContentType(), &buf)
	wantError(t, "no file part", resp, b, http.StatusBadRequest, "invalid_argument", `file: is required: the form has no part named "file"`)
	if strings.Contains(string(b), "well-formed") {
		t.Errorf("no file part: %s; a well-formed form", b)
	}
	// A form cut short.
	resp, b = post("multipart/form-data; boundary=x", strings.NewReader("--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\n\r\n\x89PNG"))
	wantError(t, "truncated form", resp, b, http.StatusBadRequest, "invalid_argument", "multipart")
	// No token: refused before the body is read.
	body, ct := form(t, "a.png", "", pngBytes(t, 100))
	resp, b = request(t, http.MethodPost, tb.URL+"/v1/files", "", http.Header{"Content-Type": {ct}}, body)
	wantError(t, "no token", resp, b, http.StatusUnauthorized, "unauthenticated", "")
	if got := stored(t, tb); got != nothingStored {
		t.Errorf("after refused uploads: %s", got)
	}
	// The fields before the file part are skipped; an empty filename is
	// "file".
	buf.Reset()
	mw = multipart.NewWriter(&buf)
	mw.WriteField("purpose", "attachment")
	part, _ := mw.CreateFormFile("file", "")
	part.Write(pngBytes(t, 100))
	mw.Close()
	resp, b = post(mw.FormDataContentType(), &buf)
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), `"filename":"file"`) {
		t.Errorf("a field, then a file without a name: %s %s", resp.Status, b)
	}
}

// TestLargeDownloadOutlivesTheWriteTimeout checks that a download which
// takes longer than the write timeout in all, to a client that reads
// steadily, is not cut: each write has its own deadline. The server's
// send buffer is small, so its writes do wait on the client.
func TestLargeDownloadOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const size = 4 << 20
	tb := setup(t, apitest.Options{WriteTimeout: time.Second, SendBuffer: 32 << 10, FileLimits: files.Limits{MaxFileBytes: size}})
	data := pngBytes(t, size)
	f := upload(t, tb, "alice", "big.png", "", data)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(32 << 10)
		}
		return c, err
	}}}
	req, _ := http.NewRequest(http.MethodGet, tb.URL+f.URL, nil)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	buf := make([]byte, 256<<10)
	var n int64
	for {
		m, err := io.ReadFull(resp.Body, buf)
		h.Write(buf[:m])
		n += int64(m)
		if err != nil {
			break
		}
		time.Sleep(150 * time.Millisecond)
	}
	took := time.Since(start)
	if got := hex.EncodeToString(h.Sum(nil)); n != size || got != f.SHA256 {
		t.Fatalf("read %d bytes of sha256 %s in %v; want all %d", n, got, took, size)
	}
	if took < 2*time.Second {
		t.Fatalf("the download took %v: not longer than the write timeout, so the test proves nothing", took)
	}
	t.Logf("%s in %v", fmt.Sprint(size), took)
}

// TestUploadOverTheUserQuota checks that an upload that would take the
// user's stored bytes past MaxUserBytes is refused 429 naming the limit,
// keeps nothing, and leaves other users alone; the same bytes again cost
// nothing.
func TestUploadOverTheUserQuota(t *testing.T) {
	t.Parallel()
	tb := setup(t, apitest.Options{FileLimits: files.Limits{MaxUserBytes: 150 << 10}})
	first := pngBytes(t, 100<<10)
	upload(t, tb, "alice", "one.png", "", first)
	before := stored(t, tb)
	body, ct := form(t, "two.png", "", pngBytes(t, 100<<10))
	resp, b := request(t, http.MethodPost, tb.URL+"/v1/files", "alice", http.Header{"Content-Type": {ct}}, body)
	wantError(t, "over the quota", resp, b, http.StatusTooManyRequests, "resource_exhausted", "153600 bytes")
	if got := stored(t, tb); got != before {
		t.Errorf("after a refusal: %s; before: %s", got, before)
	}
	upload(t, tb, "alice", "one again.png", "", first)
	upload(t, tb, "bob", "two.png", "", pngBytes(t, 100<<10))
}

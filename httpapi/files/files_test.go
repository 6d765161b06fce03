package files_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestUploadThenRead checks the round trip: an upload answers 201 with
// the file's JSON (the media type sniffed, the sha256 of the bytes, a
// signed URL), GET /v1/files/{id} answers the same file, and the content
// is the same bytes, with the headers of a file served safely.
func TestUploadThenRead(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	data := pngBytes(t, 600<<10)
	f := upload(t, tb, "alice", "cat photo.png", "", data)
	if f.Filename != "cat photo.png" || f.MediaType != "image/png" || f.Size != int64(len(data)) || f.SHA256 != sha(data) ||
		time.Since(f.CreatedAt) > time.Minute || !strings.HasPrefix(f.URL, "/v1/files/"+f.ID+"/content?") {
		t.Fatalf("upload answered %+v", f)
	}
	resp, b := request(t, http.MethodGet, tb.URL+"/v1/files/"+f.ID, "alice", nil, nil)
	var got fileJSON
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil {
		t.Fatalf("metadata: %s %s", resp.Status, b)
	}
	if got.ID != f.ID || got.SHA256 != f.SHA256 || got.Size != f.Size || got.MediaType != f.MediaType || !got.CreatedAt.Equal(f.CreatedAt) {
		t.Errorf("metadata %+v; uploaded %+v", got, f)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("metadata Cache-Control = %q; its URL expires", cc)
	}
	resp, b = request(t, http.MethodGet, tb.URL+"/v1/files/"+f.ID+"/content", "alice", nil, nil)
	if resp.StatusCode != http.StatusOK || sha(b) != f.SHA256 {
		t.Fatalf("content: %s, %d bytes of sha256 %s; want %s", resp.Status, len(b), sha(b), f.SHA256)
	}
	for k, want := range map[string]string{
		"Content-Type": "image/png", "Content-Length": fmt.Sprint(len(data)), "ETag": `"` + f.SHA256 + `"`,
		"Accept-Ranges": "bytes", "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox",
		"Content-Disposition": `inline; filename="cat photo.png"; filename*=UTF-8''cat%20photo.png`,
		"Cache-Control":       "private, max-age=3600",
	} {
		if v := resp.Header.Get(k); v != want {
			t.Errorf("content %s = %q; want %q", k, v, want)
		}
	}
	resp, b = request(t, http.MethodHead, tb.URL+"/v1/files/"+f.ID+"/content", "alice", nil, nil)
	if resp.StatusCode != http.StatusOK || len(b) != 0 || resp.ContentLength != int64(len(data)) {
		t.Errorf("HEAD: %s, %d bytes of body, Content-Length %d", resp.Status, len(b), resp.ContentLength)
	}
}

// TestContentRanges checks single ranges (the first bytes, the middle
// across the 256 KiB boundary of two stored chunks, a suffix, an open
// end), 416 for a range past the end, and the whole file for several
// ranges or an If-Range that does not match.
func TestContentRanges(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	data := pngBytes(t, 600<<10)
	f := upload(t, tb, "alice", "big.png", "image/png", data)
	url := tb.URL + "/v1/files/" + f.ID + "/content"
	size := len(data)
	for _, c := range []struct {
		rng, ifRange string
		status       int
		from, to     int // the bytes [from, to) of data
	}{
		{"bytes=0-99", "", http.StatusPartialContent, 0, 100},
		{"bytes=262000-263999", "", http.StatusPartialContent, 262000, 264000},
		{"bytes=-500", "", http.StatusPartialContent, size - 500, size},
		{"bytes=524288-", "", http.StatusPartialContent, 524288, size},
		{"bytes=0-99", `"` + f.SHA256 + `"`, http.StatusPartialContent, 0, 100},
		{"bytes=0-99", `"another"`, http.StatusOK, 0, size},
		{"bytes=0-1,5-6", "", http.StatusOK, 0, size},
	} {
		h := http.Header{"Range": {c.rng}}
		if c.ifRange != "" {
			h.Set("If-Range", c.ifRange)
		}
		resp, b := request(t, http.MethodGet, url, "alice", h, nil)
		if resp.StatusCode != c.status || !bytes.Equal(b, data[c.from:c.to]) {
			t.Errorf("Range %s (If-Range %s): %s, %d bytes; want %d, bytes [%d, %d)", c.rng, c.ifRange, resp.Status, len(b), c.status, c.from, c.to)
			continue
		}
		if c.status == http.StatusPartialContent {
			if cr, want := resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", c.from, c.to-1, size); cr != want {
				t.Errorf("Range %s: Content-Range %q; want %q", c.rng, cr, want)
			}
		}
	}
	resp, b := request(t, http.MethodGet, url, "alice", http.Header{"Range": {fmt.Sprintf("bytes=%d-", size)}}, nil)
	wantError(t, "a range past the end", resp, b, http.StatusRequestedRangeNotSatisfiable, "out_of_range", "past the end")
	if cr := resp.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes */%d", size) {
		t.Errorf("416 Content-Range = %q", cr)
	}
}

// TestContentETag checks that If-None-Match with the file's ETag answers
// 304 without the bytes, and another tag the bytes.
func TestContentETag(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	f := upload(t, tb, "alice", "a.png", "", pngBytes(t, 1000))
	url := tb.URL + "/v1/files/" + f.ID + "/content"
	resp, b := request(t, http.MethodGet, url, "alice", http.Header{"If-None-Match": {`"` + f.SHA256 + `"`}}, nil)
	if resp.StatusCode != http.StatusNotModified || len(b) != 0 || resp.Header.Get("ETag") != `"`+f.SHA256+`"` {
		t.Errorf("If-None-Match the ETag: %s, %d bytes, ETag %q; want 304 without a body", resp.Status, len(b), resp.Header.Get("ETag"))
	}
	resp, b = request(t, http.MethodGet, url, "alice", http.Header{"If-None-Match": {`"other"`}}, nil)
	if resp.StatusCode != http.StatusOK || len(b) != 1000 {
		t.Errorf("If-None-Match another tag: %s, %d bytes; want 200 with the file", resp.Status, len(b))
	}
}

// TestContentNeverRunsInTheOrigin checks the headers of files a browser
// could run or render (HTML, SVG, JavaScript, PDF): downloaded as
// attachments, never sniffed, sandboxed; and only raster images inline.
func TestContentNeverRunsInTheOrigin(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	gif := []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
	for _, c := range []struct {
		filename               string
		data                   []byte
		mediaType, disposition string
	}{
		{"page.html", []byte("<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>"), "text/html", "attachment"},
		{"logo.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), "image/svg+xml", "attachment"},
		{"app.js", []byte("#!/usr/bin/env node\nconsole.log(document.cookie)\n"), "", "attachment"},
		{"doc.pdf", []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"), "application/pdf", "attachment"},
		{"dot.gif", gif, "image/gif", "inline"},
		{"dot.png", pngBytes(t, 100), "image/png", "inline"},
	} {
		f := upload(t, tb, "alice", c.filename, "", c.data)
		resp, b := request(t, http.MethodGet, tb.URL+"/v1/files/"+f.ID+"/content", "alice", nil, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, c.data) {
			t.Errorf("%s: %s, %d bytes", c.filename, resp.Status, len(b))
			continue
		}
		ct := resp.Header.Get("Content-Type")
		if c.mediaType != "" && !strings.HasPrefix(ct, c.mediaType) {
			t.Errorf("%s: Content-Type %q; want %s", c.filename, ct, c.mediaType)
		}
		if d := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(d, c.disposition+";") {
			t.Errorf("%s (%s): Content-Disposition %q; want %s", c.filename, ct, d, c.disposition)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Content-Security-Policy") != "sandbox" {
			t.Errorf("%s: nosniff %q, CSP %q", c.filename, resp.Header.Get("X-Content-Type-Options"), resp.Header.Get("Content-Security-Policy"))
		}
	}
}

// TestSignedURL checks that the URL of a file's JSON reads its content
// without a bearer token, and that nothing else does: a changed sig, the
// signature of one file on another (the owner's, another user's, none),
// a later exp, an expired URL, a half of one; each 403 naming the
// parameter at fault. And that a signature opens no other route.
func TestSignedURL(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	data := pngBytes(t, 5000)
	f := upload(t, tb, "alice", "a.png", "", data)
	other := upload(t, tb, "alice", "b.png", "", pngBytes(t, 100))
	bobs := upload(t, tb, "bob", "c.png", "", pngBytes(t, 100))
	resp, b := request(t, http.MethodGet, tb.URL+f.URL, "", nil, nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, data) {
		t.Fatalf("signed URL without a token: %s, %d bytes", resp.Status, len(b))
	}
	resp, b = request(t, http.MethodGet, tb.URL+f.URL, "", http.Header{"Range": {"bytes=0-9"}}, nil)
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(b, data[:10]) {
		t.Errorf("signed URL with a Range: %s, %d bytes", resp.Status, len(b))
	}
	query := f.URL[strings.Index(f.URL, "?"):]
	exp, sig := queryOf(t, f.URL)
	flipped := []byte(sig)
	flipped[5] ^= 0x01
	signer, err := files.NewSigner(apitest.FileURLKey, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expired, _ := signer.URL(uuid.MustParse(f.ID), "alice", time.Now().Add(-2*time.Hour))
	for _, c := range []struct{ name, path, field string }{
		{"changed sig", "/v1/files/" + f.ID + "/content?exp=" + exp + "&sig=" + string(flipped), "sig"},
		{"another file of the owner", "/v1/files/" + other.ID + "/content" + query, "sig"},
		{"another user's file", "/v1/files/" + bobs.ID + "/content" + query, "sig"},
		{"no such file", "/v1/files/" + uuid.NewString() + "/content" + query, "sig"},
		{"later exp", fmt.Sprintf("/v1/files/%s/content?exp=%d&sig=%s", f.ID, time.Now().Add(48*time.Hour).Unix(), sig), "sig"},
		{"expired", expired, "exp"},
		{"exp only", "/v1/files/" + f.ID + "/content?exp=" + exp, "sig"},
		{"sig only", "/v1/files/" + f.ID + "/content?sig=" + sig, "exp"},
	} {
		resp, b := request(t, http.MethodGet, tb.URL+c.path, "", nil, nil)
		wantError(t, c.name, resp, b, http.StatusForbidden, "permission_denied", c.field+":")
	}
	// Even with a valid token, a signature that does not verify is refused:
	// the signature decides.
	resp, b = request(t, http.MethodGet, tb.URL+expired, "alice", nil, nil)
	wantError(t, "expired with a token", resp, b, http.StatusForbidden, "permission_denied", "expired")
	resp, b = request(t, http.MethodGet, tb.URL+"/v1/files/"+f.ID+"/content", "", nil, nil)
	wantError(t, "no token, no signature", resp, b, http.StatusUnauthorized, "unauthenticated", "")
	resp, b = request(t, http.MethodGet, tb.URL+"/v1/files/"+f.ID+query, "", nil, nil)
	wantError(t, "a signature on the metadata route", resp, b, http.StatusUnauthorized, "unauthenticated", "")
	resp, b = request(t, http.MethodGet, tb.URL+"/v1/files/not-a-uuid/content"+query, "", nil, nil)
	wantError(t, "bad id", resp, b, http.StatusBadRequest, "invalid_argument", "id")
}

func queryOf(t *testing.T, u string) (exp, sig string) {
	t.Helper()
	_, q, _ := strings.Cut(u, "?")
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "exp":
			exp = v
		case "sig":
			sig = v
		}
	}
	if exp == "" || sig == "" {
		t.Fatalf("URL %q lacks exp or sig", u)
	}
	return exp, sig
}

// TestAnotherUsersFileIsNotFound checks that bob cannot read alice's
// file by its id, in any route, and cannot tell it from no file.
func TestAnotherUsersFileIsNotFound(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	f := upload(t, tb, "alice", "a.png", "", pngBytes(t, 100))
	for _, path := range []string{"/v1/files/" + f.ID, "/v1/files/" + f.ID + "/content", "/v1/files/" + uuid.NewString() + "/content"} {
		resp, b := request(t, http.MethodGet, tb.URL+path, "bob", nil, nil)
		wantError(t, "bob GET "+path, resp, b, http.StatusNotFound, "not_found", "")
	}
	resp, b := request(t, http.MethodHead, tb.URL+"/v1/files/"+f.ID+"/content", "bob", nil, nil)
	if resp.StatusCode != http.StatusNotFound || len(b) != 0 {
		t.Errorf("bob HEAD content: %s", resp.Status)
	}
	resp, b = request(t, http.MethodGet, tb.URL+"/v1/files/nope", "alice", nil, nil)
	wantError(t, "bad id", resp, b, http.StatusBadRequest, "invalid_argument", "id:")
}

package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close)

	get := func(t *testing.T, path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, string(body)
	}

	asset := func(t *testing.T, ext string) string {
		t.Helper()
		entries, err := fs.ReadDir(dist, "dist/assets")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ext) {
				return "/assets/" + e.Name()
			}
		}
		t.Fatalf("no %s asset in dist/assets: run npm run build --prefix web", ext)
		return ""
	}

	t.Run("PagesCarryTheCSP", func(t *testing.T) {
		for _, p := range []string{"/", "/c/6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11"} {
			res, body := get(t, p)
			csp := res.Header.Get("Content-Security-Policy")
			if csp != ContentSecurityPolicy || !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") {
				t.Errorf("%s: Content-Security-Policy %q", p, csp)
			}
			// The built page needs nothing the policy forbids: no inline
			// script or style element.
			if strings.Contains(body, "<script>") || strings.Contains(body, "<style") || strings.Contains(body, " style=") {
				t.Errorf("%s has inline script or style, which the policy blocks", p)
			}
		}
	})

	t.Run("IndexIsRevalidated", func(t *testing.T) {
		res, body := get(t, "/")
		if res.StatusCode != 200 || !strings.Contains(body, `<div id="root">`) {
			t.Fatalf("GET / = %d %q", res.StatusCode, body)
		}
		if got := res.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
			t.Errorf("Content-Type = %q", got)
		}
		if got := res.Header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("Cache-Control = %q", got)
		}
		res2, _ := get(t, "/", "If-None-Match", res.Header.Get("ETag"))
		if res2.StatusCode != http.StatusNotModified {
			t.Errorf("conditional GET / = %d, want 304", res2.StatusCode)
		}
	})

	t.Run("ClientRoutesGetTheApp", func(t *testing.T) {
		for _, p := range []string{"/c/0b7e2a1c-1111-4222-8333-944455556666", "/c/x?m=y", "/some/deep/route"} {
			res, body := get(t, p)
			if res.StatusCode != 200 || !strings.Contains(body, `<div id="root">`) {
				t.Errorf("GET %s = %d", p, res.StatusCode)
			}
			if got := res.Header.Get("Cache-Control"); got != "no-cache" {
				t.Errorf("GET %s: Cache-Control = %q", p, got)
			}
		}
	})

	// A share link's page (/s/<token>, a 43-character base64url token) is
	// the app, and sends no Referer: a link the shared conversation holds
	// must not carry the token to another site.
	t.Run("ShareLinksGetTheAppWithoutReferrer", func(t *testing.T) {
		for _, p := range []string{"/s/Xy3-_0123456789abcdefghijklmnopqrstuvwxyzABCD", "/s/Xy3-_0123456789abcdefghijklmnopqrstuvwxyzABCD/"} {
			res, body := get(t, p)
			if res.StatusCode != 200 || !strings.Contains(body, `<div id="root">`) {
				t.Errorf("GET %s = %d", p, res.StatusCode)
			}
			if got := res.Header.Get("Referrer-Policy"); got != "no-referrer" {
				t.Errorf("GET %s: Referrer-Policy = %q, want no-referrer", p, got)
			}
			if got := res.Header.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
				t.Errorf("GET %s: Content-Security-Policy = %q", p, got)
			}
		}
	})

	t.Run("HashedAssetsAreCachedLong", func(t *testing.T) {
		for ext, ct := range map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"} {
			res, _ := get(t, asset(t, ext))
			if res.StatusCode != 200 {
				t.Fatalf("GET %s asset = %d", ext, res.StatusCode)
			}
			if got := res.Header.Get("Content-Type"); got != ct {
				t.Errorf("%s: Content-Type = %q, want %q", ext, got, ct)
			}
			if got := res.Header.Get("Cache-Control"); !strings.Contains(got, "immutable") {
				t.Errorf("%s: Cache-Control = %q", ext, got)
			}
		}
	})

	t.Run("APIPathsAndMissingFilesAreNotTheApp", func(t *testing.T) {
		for _, p := range []string{
			"/convo.v1.ConversationService/Unknown",
			"/convo.v1.Other/X",
			"/healthz",
			"/assets/missing-123.js",
			"/favicon.ico",
		} {
			res, body := get(t, p)
			if res.StatusCode != http.StatusNotFound || strings.Contains(body, `<div id="root">`) {
				t.Errorf("GET %s = %d, want 404 without the app", p, res.StatusCode)
			}
		}
	})

	t.Run("OnlyGetAndHead", func(t *testing.T) {
		res, err := http.Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST / = %d, want 405", res.StatusCode)
		}
	})
}

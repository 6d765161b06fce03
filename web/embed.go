// Package web serves convo's web app: the single-page app built by Vite
// into web/dist (committed, so the server builds without npm) and embedded
// in the binary.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed all:dist
var dist embed.FS

// ContentSecurityPolicy is sent with the app's pages: script, style,
// font, image and connections from the server's own origin only (images
// also as data: URLs), no inline script or style element, no plugins, no
// framing, no <base>, and forms only to the server. Markdown that a model
// writes therefore cannot run script or load anything from elsewhere. The
// browser suite (web/e2e) runs under it and fails on any violation, which
// Chromium reports as a console error.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'; object-src 'none'"

// file is one embedded file, read once at start.
type file struct {
	body        []byte
	etag        string
	contentType string
}

// Handler serves the web app. Existing files are served with their content
// type; hashed build assets (under /assets/) are cached for a year, every
// other file is revalidated (ETag). A GET for any other path without a file
// extension answers index.html, so client-side routes such as /c/<id> and
// a share link's page /s/<token> work on reload, except API paths
// (/convo.v1.*, /healthz), which answer 404: the API is mounted ahead of
// this handler, and a path it does not know must not turn into a page.
// Pages send no Referer (a share link's token stays on its page). Methods
// other than GET and HEAD answer 405.
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	files := map[string]*file{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files["/"+p] = &file{
			body:        body,
			etag:        `"` + hex.EncodeToString(sum[:12]) + `"`,
			contentType: contentType(p),
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return &handler{files: files, index: files["/index.html"]}
}

type handler struct {
	files map[string]*file
	index *file // nil when the app was not built
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	if isAPIPath(p) {
		http.NotFound(w, r)
		return
	}
	if p == "/index.html" {
		p = "/"
	}
	if f, ok := h.files[p]; ok {
		cache := "no-cache"
		if strings.HasPrefix(p, "/assets/") {
			cache = "public, max-age=31536000, immutable"
		}
		serve(w, r, f, cache)
		return
	}
	// A missing file (a path with an extension) is a 404, not the app: a
	// stale asset URL must not be answered with HTML.
	if path.Ext(p) != "" || h.index == nil {
		http.NotFound(w, r)
		return
	}
	serve(w, r, h.index, "no-cache")
}

func serve(w http.ResponseWriter, r *http.Request, f *file, cache string) {
	hdr := w.Header()
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Cache-Control", cache)
	hdr.Set("ETag", f.etag)
	hdr.Set("X-Content-Type-Options", "nosniff")
	if f.contentType == "text/html; charset=utf-8" {
		hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("X-Frame-Options", "DENY")
	}
	// ServeContent answers If-None-Match with 304 and handles HEAD and ranges.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

// isAPIPath reports whether p belongs to the API rather than the app.
func isAPIPath(p string) bool {
	return strings.HasPrefix(p, "/convo.v1.") || p == "/healthz" || strings.HasPrefix(p, "/healthz/")
}

// contentType is the media type of a file by its extension, with the
// types a browser is strict about fixed here rather than taken from the
// host's MIME tables.
func contentType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".json", ".map":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	case ".wasm":
		return "application/wasm"
	case ".woff2":
		return "font/woff2"
	case ".png":
		return "image/png"
	case ".ico":
		return "image/x-icon"
	case ".txt":
		return "text/plain; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

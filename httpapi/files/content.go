package files

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	convofiles "github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
)

// copyBuffer is the size of each write of a file's bytes to the client;
// each write gets the write timeout anew.
const copyBuffer = 64 << 10

// maxAge is how long a browser may keep a file's bytes: they never
// change under an id (a new upload is a new id).
const maxAge = time.Hour

// Content answers GET (and HEAD) /v1/files/{id}/content. With an exp or
// sig query parameter the request is a signed URL's: the signature
// decides (403 permission_denied naming exp or sig when it does not
// verify, or has expired), whatever else the request carries; without
// them it authenticates as every route does. Then serve.
func (h *Handler) Content(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("exp") && !q.Has("sig") {
		h.s.WithUser(http.HandlerFunc(h.ownContent)).ServeHTTP(w, r)
		return
	}
	id, err := fileID(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	who, err := h.owners.FileOwner(r.Context(), id)
	if errors.Is(err, convofiles.ErrNotFound) {
		// A signature for no file: refused as any other that does not
		// verify, so that a signed URL tells nothing of other ids.
		err = convofiles.ErrSignatureMismatch
	} else if err == nil {
		err = h.signer.Verify(id, who, q.Get("exp"), q.Get("sig"), h.now())
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	f, err := h.files.Get(r.Context(), who, id)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.serve(w, r, f)
}

// ownContent serves the authenticated caller's file.
func (h *Handler) ownContent(w http.ResponseWriter, r *http.Request) {
	f, err := h.ownFile(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.serve(w, r, f)
}

// serve writes f's bytes, or the one range the request asks for (206;
// 416 when it starts past the end), or 304 when If-None-Match names its
// ETag (its sha256). The headers keep a browser from running the bytes
// in convo's origin: nosniff, a sandbox CSP, and attachment unless f is a
// raster image (disposition). The bytes stream from Service.Open, each
// write with its own write deadline, so that a large file is not cut by
// the deadline the response started with.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, f convofiles.File) {
	etag := `"` + f.SHA256 + `"`
	hd := w.Header()
	hd.Set("ETag", etag)
	hd.Set("Accept-Ranges", "bytes")
	hd.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(maxAge.Seconds())))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "sandbox")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	rng, answer := byteRange{off: 0, n: f.Size}, wholeFile
	if ir := r.Header.Get("If-Range"); ir == "" || ir == etag {
		if got, a := parseRange(r.Header.Get("Range"), f.Size); a != wholeFile {
			rng, answer = got, a
		}
	}
	if answer == unsatisfiable {
		hd.Set("Content-Range", "bytes */"+strconv.FormatInt(f.Size, 10))
		h.writeError(w, r, &httpx.Refusal{Status: http.StatusRequestedRangeNotSatisfiable, Code: "out_of_range",
			Message: "Range: " + r.Header.Get("Range") + " starts past the end of the file (" + strconv.FormatInt(f.Size, 10) + " bytes)"})
		return
	}
	var body io.ReadCloser
	if r.Method != http.MethodHead {
		var err error
		if body, err = h.files.Open(r.Context(), f, rng.off, rng.n); err != nil {
			h.writeError(w, r, err)
			return
		}
		defer body.Close()
	}
	hd.Set("Content-Type", f.MediaType)
	hd.Set("Content-Disposition", disposition(f.MediaType, f.Filename))
	hd.Set("Content-Length", strconv.FormatInt(rng.n, 10))
	status := http.StatusOK
	if answer == partOfFile {
		status = http.StatusPartialContent
		hd.Set("Content-Range", "bytes "+strconv.FormatInt(rng.off, 10)+"-"+strconv.FormatInt(rng.off+rng.n-1, 10)+
			"/"+strconv.FormatInt(f.Size, 10))
	}
	w.WriteHeader(status)
	if body == nil {
		return
	}
	out := &deadlineWriter{w: w, rc: http.NewResponseController(w), timeout: h.s.WriteTimeout}
	if _, err := io.CopyBuffer(out, body, make([]byte, copyBuffer)); err != nil {
		if r.Context().Err() == nil && !out.failed {
			h.s.Logger.ErrorContext(r.Context(), "file content failed mid-response", "file_id", f.ID, "err", err)
		}
		// The status is sent: only cutting the response tells the client
		// that its bytes are incomplete.
		panic(http.ErrAbortHandler)
	}
}

// deadlineWriter gives each write to the client its own write deadline.
type deadlineWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	failed  bool // a write to the client failed (it is gone or too slow)
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	n, err := d.w.Write(p)
	if err != nil {
		d.failed = true
	}
	return n, err
}

// writeError answers err as every route does (the files errors are
// conversation errors too), but for a signature that does not verify:
// 403 permission_denied, naming exp or sig.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var sig *convofiles.SignatureError
	if errors.As(err, &sig) {
		err = &httpx.Refusal{Status: http.StatusForbidden, Code: "permission_denied", Message: sig.Error()}
	}
	h.s.WriteError(w, r, err)
}

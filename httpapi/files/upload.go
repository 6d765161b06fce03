package files

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"time"

	"github.com/convo-dev/convo/conversation"
	convofiles "github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/wire"
)

// FormOverhead is what an upload's body may hold besides the file's
// bytes: the multipart boundaries, the part's headers, and small fields
// before the file part. The body is capped at MaxFileBytes plus this.
const FormOverhead = 64 << 10

// Upload answers POST /v1/files: a multipart/form-data body whose first
// part named "file" is the file, its filename and Content-Type the
// declared ones; other parts before it are skipped, anything after it is
// not read. The part streams into files.Service.Upload as it arrives:
// nothing buffers the whole file, and the body is cut as soon as it is
// longer than MaxFileBytes plus FormOverhead (at once when its
// Content-Length says so). 201 with the file's JSON; 413 for a file over
// the limit, 415 for a body that is not a multipart form, 400 naming the
// field for everything the service refuses, 429 past the user's write
// rate (Server.Writes, checked before the body is read) or stored bytes
// (files.QuotaError), 408 for a body that did not arrive in time
// (guard.BodyDeadline). A refused upload stores nothing.
func (h *Handler) Upload(w http.ResponseWriter, r *http.Request) {
	who, err := owner(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ct := r.Header.Get("Content-Type")
	if media, params, err := mime.ParseMediaType(ct); err != nil || media != "multipart/form-data" || params["boundary"] == "" {
		h.notMultipart(w, r, ct)
		return
	}
	limit := h.limits.MaxFileBytes + FormOverhead
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close") // the body is not read
		h.writeError(w, r, h.tooLarge())
		return
	}
	// An upload is a write: it takes one of the user's write tokens
	// before its body is read.
	if err := h.s.Writes.Allow(who); err != nil {
		h.writeError(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		h.notMultipart(w, r, ct)
		return
	}
	part, err := filePart(mr)
	if err != nil {
		h.bodyError(w, r, err)
		return
	}
	filename, err := partFilename(part)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	in := &partReader{r: part}
	f, err := h.files.Upload(r.Context(), who, filename, part.Header.Get("Content-Type"), in)
	// The response's write deadline ran from the request's start, while
	// the body arrived: the answer gets its own.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.s.WriteTimeout))
	var fileTooLarge *convofiles.TooLargeError
	switch {
	case in.err != nil:
		// Whatever the service made of it, the body failed.
		h.bodyError(w, r, in.err)
	case errors.As(err, &fileTooLarge):
		h.writeError(w, r, h.tooLarge())
	case err != nil:
		h.writeError(w, r, err)
	default:
		h.writeFile(w, http.StatusCreated, f)
	}
}

// partReader is the file part as the service reads it. A read that fails
// (the form cut short, the body over its cap or late) fails with a
// *partError, which, unlike the error it carries, is no io.EOF or
// io.ErrUnexpectedEOF to errors.Is: a reader of the part must not take a
// form cut short for a short file. The first such error is kept.
type partReader struct {
	r   io.Reader
	err error
}

func (p *partReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && err != io.EOF {
		if p.err == nil {
			p.err = err
		}
		return n, &partError{msg: err.Error()}
	}
	return n, err
}

// partError is a failed read of the file part (see partReader).
type partError struct{ msg string }

func (e *partError) Error() string { return "body: " + e.msg }

// filePart returns the first part named "file", skipping the parts
// before it. Errors: Invalid naming file when there is none; the body's
// read errors as they are.
func filePart(mr *multipart.Reader) (*multipart.Part, error) {
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, wire.Invalid("file", "is required: the form has no part named \"file\"")
		}
		if err != nil {
			return nil, err
		}
		if part.FormName() == "file" {
			return part, nil
		}
		if _, err := io.Copy(io.Discard, part); err != nil {
			return nil, err
		}
	}
}

// partFilename is the filename the part declares, as the client sent it
// (Part.FileName would keep only its last path element, hiding a "/" the
// service refuses); "" when it declares none.
func partFilename(part *multipart.Part) (string, error) {
	cd := part.Header.Get("Content-Disposition")
	_, params, err := mime.ParseMediaType(cd)
	if err != nil {
		return "", wire.Invalid("filename", "the file part's Content-Disposition cannot be read: %v", err)
	}
	return params["filename"], nil
}

// bodyError answers an upload whose body could not be read: over the
// cap 413, late 408 (the connection is closed after it), anything else
// (a form cut short, a malformed part header) 400.
func (h *Handler) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	var refused *conversation.Error
	switch {
	case errors.As(err, &tooLarge):
		h.writeError(w, r, h.tooLarge())
	case errors.Is(err, os.ErrDeadlineExceeded):
		httpx.BodyTimeout(w, err)
	case errors.As(err, &refused):
		h.writeError(w, r, err) // the form is read, and refused (no file part)
	default:
		h.writeError(w, r, wire.Invalid("body", "is not a well-formed multipart form: %v", err))
	}
}

// tooLarge is the refusal of a file over MaxFileBytes.
func (h *Handler) tooLarge() error {
	return &httpx.Refusal{Status: http.StatusRequestEntityTooLarge, Code: "invalid_argument",
		Message: fmt.Sprintf("file: is larger than %d bytes (%s), the most a file may hold (CONVO_FILE_MAX_BYTES)",
			h.limits.MaxFileBytes, convofiles.BinarySize(h.limits.MaxFileBytes))}
}

// notMultipart answers 415 to a body that is not a multipart form.
func (h *Handler) notMultipart(w http.ResponseWriter, r *http.Request, got string) {
	if got == "" {
		got = "none"
	}
	w.Header().Set("Accept-Post", "multipart/form-data")
	h.writeError(w, r, &httpx.Refusal{Status: http.StatusUnsupportedMediaType, Code: "invalid_argument",
		Message: "Content-Type: want multipart/form-data with a part named \"file\", got " + wire.Truncate(got, 100)})
}

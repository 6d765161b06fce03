package files

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convofiles "github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/wire"
)

// Owners finds whose a file is from its id alone, for a signed URL, which
// names the file but not its owner (postgres.Store is one).
type Owners interface {
	// FileOwner returns the owner of file id; files.ErrNotFound when there
	// is no such file.
	FileOwner(ctx context.Context, id uuid.UUID) (string, error)
}

// Handler serves the routes of the package doc. Build it with New.
type Handler struct {
	s      *httpx.Server
	files  *convofiles.Service
	signer *convofiles.Signer
	owners Owners
	limits convofiles.Limits
	// now is the clock of signatures.
	now func() time.Time
}

// New returns the handler of the file routes on s, storing with svc,
// signing URLs with signer and finding a signed URL's owner with owners.
// The upload's body cap derives from svc's MaxFileBytes.
func New(s *httpx.Server, svc *convofiles.Service, signer *convofiles.Signer, owners Owners) *Handler {
	return &Handler{s: s, files: svc, signer: signer, owners: owners, limits: svc.Limits(), now: time.Now}
}

// fileJSON is a file as the routes answer it.
type fileJSON struct {
	ID        string    `json:"id"`
	Filename  string    `json:"filename"`
	MediaType string    `json:"mediaType"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"createdAt"`
	// URL is the content's signed path and query, valid for the Signer's
	// TTL, for a client to use where it cannot send a bearer token.
	URL string `json:"url"`
}

// writeFile answers status with f's JSON and a fresh signed URL. The
// answer is not cached: its URL expires.
func (h *Handler) writeFile(w http.ResponseWriter, status int, f convofiles.File) {
	u, _ := h.signer.URL(f.ID, f.Owner, h.now())
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	if status == http.StatusCreated {
		hd.Set("Location", "/v1/files/"+f.ID.String())
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(fileJSON{
		ID: f.ID.String(), Filename: f.Filename, MediaType: f.MediaType, Size: f.Size, SHA256: f.SHA256,
		CreatedAt: f.CreatedAt.UTC(), URL: u,
	})
}

// fileID parses the {id} path parameter: Invalid naming id.
func fileID(r *http.Request) (uuid.UUID, error) {
	return wire.RequireID("id", r.PathValue("id"))
}

// owner is the user WithUser authenticated.
func owner(r *http.Request) (string, error) {
	o, ok := conversation.UserFromContext(r.Context())
	if !ok {
		return "", conversation.Errorf(conversation.Unauthenticated, "no authenticated user in the request context")
	}
	return o, nil
}

// Metadata answers GET /v1/files/{id}: the caller's file's JSON, with a
// fresh signed URL; 404 for a file of another user or none.
func (h *Handler) Metadata(w http.ResponseWriter, r *http.Request) {
	f, err := h.ownFile(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeFile(w, http.StatusOK, f)
}

// ownFile is the caller's file {id}.
func (h *Handler) ownFile(r *http.Request) (convofiles.File, error) {
	who, err := owner(r)
	if err != nil {
		return convofiles.File{}, err
	}
	id, err := fileID(r)
	if err != nil {
		return convofiles.File{}, err
	}
	return h.files.Get(r.Context(), who, id)
}

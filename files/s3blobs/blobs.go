package s3blobs

import (
	"context"
	"errors"
	"io"

	"github.com/google/uuid"
)

// Blobs and ErrNotFound are a local copy of package files' pinned
// interface, until that package lands; then this file goes and Store
// implements files.Blobs.
type Blobs interface {
	Put(ctx context.Context, id uuid.UUID, r io.Reader) (int64, error)
	Get(ctx context.Context, id uuid.UUID, off, n int64) (io.ReadCloser, error)
	Delete(ctx context.Context, id uuid.UUID) error
}

// ErrNotFound: there is no such blob.
var ErrNotFound = errors.New("not found")

package files

import (
	"context"
	"io"

	"github.com/google/uuid"
)

// Blobs keeps files' bytes; all metadata stays in PostgreSQL. Blob ids are
// UUIDs the Service picks.
type Blobs interface {
	// Put stores the bytes of r, read to EOF, as blob id, and returns how
	// many there were. On error nothing of id is left behind. Memory use
	// must not grow with the blob's size. An error of r comes back
	// wrapped, so that errors.As finds it (a *TooLargeError).
	Put(ctx context.Context, id uuid.UUID, r io.Reader) (int64, error)
	// Get returns bytes [off, off+n) of blob id (n < 0: to the end).
	// ErrNotFound when there is no such blob.
	Get(ctx context.Context, id uuid.UUID, off, n int64) (io.ReadCloser, error)
	// Delete removes blob id; deleting a missing blob is not an error.
	Delete(ctx context.Context, id uuid.UUID) error
}

// Storage names a Blobs in the metadata (convo.file_blobs.storage), so
// that a server never reads a blob from a store that does not hold it.
const (
	StoragePostgres = "postgres"
	StorageS3       = "s3"
)

package postgres_test

import (
	"context"
	"io"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/files/blobstest"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/postgres"
)

// TestFileBlobsConformance runs the blob stores' conformance suite, the
// one the S3 store passes (files/s3blobs), against the PostgreSQL store.
// Its memory check is TestFileUploadsHoldNoFile's, which uploads the same
// gigabyte through files.Service and so through this store.
func TestFileBlobsConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	blobs := pendingFirst{FileBlobs: postgres.NewFileBlobs(pool), store: postgres.NewFileStore(pool)}
	blobstest.Run(t, func(*testing.T) files.Blobs { return blobs }, "TestFileUploadsHoldNoFile")
}

// pendingFirst records each blob as pending before its bytes, as
// files.Service does: the chunks' rows refer to the blob's.
type pendingFirst struct {
	*postgres.FileBlobs
	store *postgres.FileStore
}

func (p pendingFirst) Put(ctx context.Context, id uuid.UUID, r io.Reader) (int64, error) {
	if err := p.store.CreatePendingBlob(ctx, id, "conformance", files.StoragePostgres); err != nil {
		return 0, err
	}
	return p.FileBlobs.Put(ctx, id, r)
}

package files

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// CollectBatch is how many files or blobs one statement of Collect takes
// on.
const CollectBatch = 100

// Collect is the garbage collector. It deletes the files no message
// holds that are older than grace (uploaded and never sent, or released
// by deleting their message or conversation), then the blobs no file
// points to any more, and the pending blobs older than grace (uploads
// whose process died), deleting their bytes from the Blobs. It returns how
// many files it deleted. Grace must be longer than an upload may take.
//
// Several servers may collect at once: each skips the files another is
// deleting, and a blob is given up under its owner's lock, so an upload
// committing the same bytes at that moment either shares it before (and
// the blob stays) or stores its own copy.
func (s *Service) Collect(ctx context.Context, grace time.Duration) (int, error) {
	files := 0
	for {
		n, err := s.store.CollectFiles(ctx, grace, CollectBatch)
		if err != nil {
			return files, fmt.Errorf("files: collect files: %w", err)
		}
		files += n
		if n < CollectBatch {
			break
		}
	}
	for {
		refs, err := s.store.UnreferencedBlobs(ctx, CollectBatch)
		if err != nil {
			return files, fmt.Errorf("files: collect blobs: %w", err)
		}
		if len(refs) == 0 {
			break
		}
		released, err := s.store.ReleaseBlobs(ctx, refs)
		if err != nil {
			return files, fmt.Errorf("files: collect blobs: %w", err)
		}
		if err := s.drop(ctx, released); err != nil {
			return files, err
		}
		if len(refs) < CollectBatch {
			break
		}
	}
	for {
		pending, err := s.store.PendingBlobs(ctx, grace, CollectBatch)
		if err != nil {
			return files, fmt.Errorf("files: collect pending blobs: %w", err)
		}
		if err := s.drop(ctx, pending); err != nil {
			return files, err
		}
		if len(pending) < CollectBatch {
			break
		}
	}
	return files, nil
}

// drop deletes pending blobs: their bytes first, then their records, so
// that bytes never outlive their record (a record left without bytes is
// collected again; bytes left without a record would never be).
func (s *Service) drop(ctx context.Context, ids []uuid.UUID) error {
	var errs []error
	for _, id := range ids {
		if err := s.blobs.Delete(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("files: delete the bytes of blob %s: %w", id, err))
			continue
		}
		if err := s.store.DeletePendingBlob(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("files: delete blob %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

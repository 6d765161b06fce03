package postgres

import (
	"context"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/files"
)

// FileOwner returns the owner of file id, whoever asks: for a signed URL,
// which names the file and proves the right to it, but not its owner
// (httpapi/files.Owners). files.ErrNotFound when there is no such file.
func (s *FileStore) FileOwner(ctx context.Context, id uuid.UUID) (string, error) {
	owners, err := s.q.FileOwner(ctx, id)
	if err != nil {
		return "", translate(err, "find a file's owner")
	}
	if len(owners) == 0 {
		return "", files.ErrNotFound
	}
	return owners[0], nil
}

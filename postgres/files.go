package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/postgres/dbq"
)

// FileStore is the files.Store on PostgreSQL: the tables convo.files and
// convo.file_blobs (db/schema/00025_files.sql).
type FileStore struct {
	pool *pgxpool.Pool
	q    *dbq.Queries
}

var _ files.Store = (*FileStore)(nil)

// NewFileStore returns the FileStore of pool's (migrated) database.
func NewFileStore(pool *pgxpool.Pool) *FileStore {
	return &FileStore{pool: pool, q: dbq.New(pool)}
}

// CreatePendingBlob implements files.Store.
func (s *FileStore) CreatePendingBlob(ctx context.Context, id uuid.UUID, owner, storage string) error {
	err := s.q.FileBlobCreatePending(ctx, dbq.FileBlobCreatePendingParams{ID: id, Owner: owner, Storage: storage})
	return translate(err, "record an upload")
}

// DeletePendingBlob implements files.Store.
func (s *FileStore) DeletePendingBlob(ctx context.Context, id uuid.UUID) error {
	return translate(s.q.FileBlobDeletePending(ctx, id), "delete a pending blob")
}

// CommitUpload implements files.Store: fn runs in a READ COMMITTED
// transaction holding owner's transaction advisory lock, so each of its
// statements sees every upload of owner committed before.
func (s *FileStore) CommitUpload(ctx context.Context, owner string, fn func(files.UploadTx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.FileOwnerLock(ctx, owner); err != nil {
			return translate(err, "lock the owner's files")
		}
		return fn(uploadTx{q})
	})
}

// File implements files.Store.
func (s *FileStore) File(ctx context.Context, owner string, id uuid.UUID) (files.StoredFile, error) {
	row, err := s.q.FileGet(ctx, dbq.FileGetParams{ID: id, Owner: owner})
	if errors.Is(err, pgx.ErrNoRows) {
		return files.StoredFile{}, files.ErrNotFound
	}
	if err != nil {
		return files.StoredFile{}, translate(err, "read a file")
	}
	return files.StoredFile{
		File: files.File{
			ID: row.ID, Owner: row.Owner, Filename: row.Filename, MediaType: row.MediaType,
			Size: row.Size, SHA256: row.Sha256, CreatedAt: row.CreatedAt,
		},
		BlobID: row.BlobID, Storage: row.Storage,
	}, nil
}

// CollectFiles implements files.Store.
func (s *FileStore) CollectFiles(ctx context.Context, olderThan time.Duration, max int) (int, error) {
	n, err := s.q.FilesCollect(ctx, dbq.FilesCollectParams{OlderThanSeconds: olderThan.Seconds(), MaxRows: int32(max)})
	return int(n), translate(err, "collect files")
}

// UnreferencedBlobs implements files.Store.
func (s *FileStore) UnreferencedBlobs(ctx context.Context, max int) ([]files.BlobRef, error) {
	rows, err := s.q.FileBlobsUnreferenced(ctx, int32(max))
	if err != nil {
		return nil, translate(err, "find unreferenced blobs")
	}
	refs := make([]files.BlobRef, len(rows))
	for i, r := range rows {
		refs[i] = files.BlobRef{ID: r.ID, Owner: r.Owner}
	}
	return refs, nil
}

// ReleaseBlobs implements files.Store. The owners' locks are taken in
// their sort order, as one upload takes one: no deadlock.
func (s *FileStore) ReleaseBlobs(ctx context.Context, refs []files.BlobRef) ([]uuid.UUID, error) {
	owners := make([]string, 0, len(refs))
	ids := make([]uuid.UUID, 0, len(refs))
	for _, r := range refs {
		owners = append(owners, r.Owner)
		ids = append(ids, r.ID)
	}
	slices.Sort(owners)
	owners = slices.Compact(owners)
	var released []uuid.UUID
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		for _, o := range owners {
			if err := q.FileOwnerLock(ctx, o); err != nil {
				return err
			}
		}
		var err error
		released, err = q.FileBlobsRelease(ctx, ids)
		return err
	})
	return released, translate(err, "release blobs")
}

// PendingBlobs implements files.Store.
func (s *FileStore) PendingBlobs(ctx context.Context, olderThan time.Duration, max int) ([]uuid.UUID, error) {
	ids, err := s.q.FileBlobsPendingBefore(ctx, dbq.FileBlobsPendingBeforeParams{
		OlderThanSeconds: olderThan.Seconds(), MaxRows: int32(max),
	})
	return ids, translate(err, "find pending blobs")
}

// IndexText implements files.Store: the vector is computed in
// PostgreSQL (convo._file_text_vector) and comes back as tsvector text.
func (s *FileStore) IndexText(ctx context.Context, text string) (files.TextIndex, error) {
	row, err := s.q.FileTextIndex(ctx, text)
	if err != nil {
		return files.TextIndex{}, translate(err, "index a file's text")
	}
	return files.TextIndex{Head: row.Head, Vector: row.Vector}, nil
}

// uploadTx is the files.UploadTx of CommitUpload.
type uploadTx struct{ q *dbq.Queries }

func (t uploadTx) BlobBySHA256(ctx context.Context, owner, sha256 string) (uuid.UUID, bool, error) {
	ids, err := t.q.FileBlobBySHA256(ctx, dbq.FileBlobBySHA256Params{Owner: owner, Sha256: sha256})
	if err != nil || len(ids) == 0 {
		return uuid.Nil, false, translate(err, "look up a blob")
	}
	return ids[0], true, nil
}

func (t uploadTx) OwnerBytes(ctx context.Context, owner string) (int64, error) {
	n, err := t.q.FileOwnerBytes(ctx, owner)
	return n, translate(err, "sum the owner's files")
}

func (t uploadTx) CommitBlob(ctx context.Context, id uuid.UUID, sha256 string, size int64) error {
	n, err := t.q.FileBlobCommit(ctx, dbq.FileBlobCommitParams{ID: id, Sha256: sha256, Size: size})
	if err != nil {
		return translate(err, "commit a blob")
	}
	if n != 1 {
		// The collector took the pending blob: the upload outlived the
		// grace period.
		return fmt.Errorf("commit blob %s: it is no longer pending", id)
	}
	return nil
}

func (t uploadTx) InsertFile(ctx context.Context, f files.File, blobID uuid.UUID) (time.Time, error) {
	created, err := t.q.FileInsert(ctx, dbq.FileInsertParams{
		ID: f.ID, Owner: f.Owner, BlobID: blobID, Filename: f.Filename,
		MediaType: f.MediaType, Size: f.Size, Sha256: strings.ToLower(f.SHA256),
	})
	return created, translate(err, "record a file")
}

func (t uploadTx) InsertText(ctx context.Context, fileID uuid.UUID, owner string, idx files.TextIndex) error {
	err := t.q.FileTextInsert(ctx, dbq.FileTextInsertParams{FileID: fileID, Owner: owner, Head: idx.Head, Vector: idx.Vector})
	return translate(err, "index a file's text")
}

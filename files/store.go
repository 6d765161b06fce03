package files

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Store keeps the metadata of files and blobs (PostgreSQL: the tables
// convo.files, convo.file_blobs, convo.message_files). A Service is its
// only caller: the rules (dedupe, quota, what the collector may remove)
// are the Service's; a Store runs the statements and holds the locks.
type Store interface {
	// CreatePendingBlob records blob id of owner, kept by storage, as
	// pending: its bytes are being written, and it holds no content yet.
	CreatePendingBlob(ctx context.Context, id uuid.UUID, owner, storage string) error
	// DeletePendingBlob removes the record of blob id while it is pending
	// (and, for the PostgreSQL store, its chunks); a committed blob, or
	// none, is left alone.
	DeletePendingBlob(ctx context.Context, id uuid.UUID) error
	// CommitUpload runs fn in one transaction that holds owner's lock
	// (every other CommitUpload and ReleaseBlobs of owner waits), and
	// commits it when fn returns nil.
	CommitUpload(ctx context.Context, owner string, fn func(UploadTx) error) error
	// File returns owner's file id with its blob. ErrNotFound when there
	// is none, or it is another owner's.
	File(ctx context.Context, owner string, id uuid.UUID) (StoredFile, error)
	// CollectFiles deletes up to max files that no message holds and that
	// are older than olderThan, and returns how many.
	CollectFiles(ctx context.Context, olderThan time.Duration, max int) (int, error)
	// UnreferencedBlobs returns up to max committed blobs no file points to.
	UnreferencedBlobs(ctx context.Context, max int) ([]BlobRef, error)
	// ReleaseBlobs turns the blobs of refs that still no file points to
	// into pending ones, under their owners' locks (so no upload can
	// share them from then on), and returns their ids.
	ReleaseBlobs(ctx context.Context, refs []BlobRef) ([]uuid.UUID, error)
	// PendingBlobs returns up to max pending blobs older than olderThan.
	PendingBlobs(ctx context.Context, olderThan time.Duration, max int) ([]uuid.UUID, error)
	// IndexText computes what search keeps of text (DecodeText of a text
	// file's first MaxTextBytes). It never fails for the text's size or
	// words: what does not fit the index is left out. It is the costly
	// part of a text upload (PostgreSQL parses every word), so Upload
	// runs it before CommitUpload, holding no owner's lock.
	IndexText(ctx context.Context, text string) (TextIndex, error)
}

// TextIndex is what search keeps of a text file, as Store.IndexText
// computed it.
type TextIndex struct {
	// Head is the text's start that search snippets are cut from.
	Head string
	// Vector is the search vector, in the Store's own form.
	Vector string
}

// UploadTx is the transaction of CommitUpload.
type UploadTx interface {
	// BlobBySHA256 returns owner's committed blob of content sha256, if
	// there is one.
	BlobBySHA256(ctx context.Context, owner, sha256 string) (id uuid.UUID, found bool, err error)
	// OwnerBytes returns the bytes owner's committed blobs hold.
	OwnerBytes(ctx context.Context, owner string) (int64, error)
	// CommitBlob gives pending blob id its content's sha256 and size.
	CommitBlob(ctx context.Context, id uuid.UUID, sha256 string, size int64) error
	// InsertFile records f, its bytes in blob blobID, and returns its
	// creation time.
	InsertFile(ctx context.Context, f File, blobID uuid.UUID) (time.Time, error)
	// InsertText records idx (Store.IndexText) as what search finds
	// owner's file fileID by.
	InsertText(ctx context.Context, fileID uuid.UUID, owner string, idx TextIndex) error
}

// StoredFile is a File with where its bytes are.
type StoredFile struct {
	File
	BlobID  uuid.UUID
	Storage string // StoragePostgres or StorageS3
}

// BlobRef names a blob and its owner.
type BlobRef struct {
	ID    uuid.UUID
	Owner string
}

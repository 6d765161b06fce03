package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// Options configure a Service.
type Options struct {
	// Store keeps the metadata (required).
	Store Store
	// Blobs keeps the bytes (required).
	Blobs Blobs
	// Storage names Blobs in the metadata: StoragePostgres (the default)
	// or StorageS3.
	Storage string
	// Limits bound uploads; unset fields take their defaults.
	Limits Limits
	// Logger, for what fails after an answer is decided (a cleanup);
	// defaults to slog.Default.
	Logger *slog.Logger
}

// Service uploads, reads and collects files. It is safe for concurrent
// use.
type Service struct {
	store   Store
	blobs   Blobs
	storage string
	limits  Limits
	logger  *slog.Logger
}

// NewService returns the Service of opts.
func NewService(opts Options) *Service {
	if opts.Storage == "" {
		opts.Storage = StoragePostgres
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Service{store: opts.Store, blobs: opts.Blobs, storage: opts.Storage, limits: opts.Limits.withDefaults(), logger: opts.Logger}
}

// Limits returns the limits the Service enforces, defaults filled in.
func (s *Service) Limits() Limits { return s.limits }

// cleanupTimeout bounds a cleanup that runs after the request's context
// may have ended.
const cleanupTimeout = 30 * time.Second

// Upload reads r to its end and keeps it as owner's file filename. The
// bytes stream to the Blobs as they arrive (memory does not grow with the
// file); the first SniffBytes decide the media type (DecideMediaType,
// given declaredType). When owner has a file of the same bytes already,
// the new file shares its stored copy.
//
// Errors, each leaving nothing behind: *FilenameError; ErrEmpty (0
// bytes); *MediaTypeError; *TooLargeError, as soon as r has given one
// byte more than Limits.MaxFileBytes (r is read no further); *QuotaError
// when owner's stored bytes plus these would exceed Limits.MaxUserBytes
// (a copy of bytes owner stores already costs nothing); an error of r or
// of the stores otherwise.
//
// A text file (IsText) has its first MaxTextBytes indexed for search
// (Store.IndexText, before the owner's lock), recorded as the upload
// commits: its size or its words never refuse it.
func (s *Service) Upload(ctx context.Context, owner, filename, declaredType string, r io.Reader) (File, error) {
	if owner == "" {
		return File{}, errors.New("files: upload without an owner")
	}
	filename, err := CheckFilename(filename)
	if err != nil {
		return File{}, err
	}
	in := &countingReader{r: r, limit: s.limits.MaxFileBytes, hash: sha256.New()}
	head := make([]byte, SniffBytes)
	n, err := io.ReadFull(in, head)
	switch {
	case errors.Is(err, io.EOF):
		return File{}, ErrEmpty
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The whole file is shorter than the sniffed head.
	case err != nil:
		return File{}, uploadError(err)
	}
	head = head[:n]
	mediaType, err := DecideMediaType(head, declaredType)
	if err != nil {
		return File{}, err
	}

	blobID := uuid.New()
	if err := s.store.CreatePendingBlob(ctx, blobID, owner, s.storage); err != nil {
		return File{}, fmt.Errorf("files: record the upload: %w", err)
	}
	var body io.Reader = io.MultiReader(bytes.NewReader(head), in)
	// A text file's start is kept as it streams by, for search: read
	// here, before the store, it is the same whichever store keeps the
	// bytes.
	var text *textCapture
	if IsText(mediaType) {
		text = &textCapture{max: MaxTextBytes}
		body = io.TeeReader(body, text)
	}
	stored, err := s.blobs.Put(ctx, blobID, body)
	if err != nil {
		s.discard(ctx, blobID)
		return File{}, uploadError(err)
	}
	if stored != in.n {
		s.discard(ctx, blobID)
		return File{}, fmt.Errorf("files: the store kept %d bytes of %d", stored, in.n)
	}

	var index TextIndex
	if text != nil {
		if index, err = s.store.IndexText(ctx, DecodeText(text.buf)); err != nil {
			s.discard(ctx, blobID)
			return File{}, fmt.Errorf("files: index the text: %w", err)
		}
		text = nil // the bytes are not needed any more
	}

	f := File{
		ID: uuid.New(), Owner: owner, Filename: filename, MediaType: mediaType,
		Size: in.n, SHA256: hex.EncodeToString(in.hash.Sum(nil)),
	}
	shared := false
	err = s.store.CommitUpload(ctx, owner, func(tx UploadTx) error {
		target := blobID
		existing, found, err := tx.BlobBySHA256(ctx, owner, f.SHA256)
		if err != nil {
			return err
		}
		if found {
			target, shared = existing, true
		} else {
			used, err := tx.OwnerBytes(ctx, owner)
			if err != nil {
				return err
			}
			if used+f.Size > s.limits.MaxUserBytes {
				return &QuotaError{Limit: s.limits.MaxUserBytes, Used: used, Size: f.Size}
			}
			if err := tx.CommitBlob(ctx, blobID, f.SHA256, f.Size); err != nil {
				return err
			}
		}
		if f.CreatedAt, err = tx.InsertFile(ctx, f, target); err != nil || !IsText(mediaType) {
			return err
		}
		return tx.InsertText(ctx, f.ID, owner, index)
	})
	if err != nil || shared {
		// Refused, or the bytes are stored already: this copy goes.
		s.discard(ctx, blobID)
	}
	if err != nil {
		var quota *QuotaError
		if errors.As(err, &quota) {
			return File{}, quota
		}
		return File{}, fmt.Errorf("files: keep the upload: %w", err)
	}
	return f, nil
}

// uploadError returns err of reading an upload: a *TooLargeError as it
// is, anything else saying where it came from.
func uploadError(err error) error {
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) {
		return tooLarge
	}
	return fmt.Errorf("files: read the upload: %w", err)
}

// discard removes pending blob id, bytes and record, also when ctx has
// ended (the client went away). What fails here the collector removes
// later: the blob stays pending.
func (s *Service) discard(ctx context.Context, id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.blobs.Delete(ctx, id); err != nil {
		s.logger.Warn("files: deleting the bytes of an upload not kept failed; the collector will", "blob", id, "err", err)
		return
	}
	if err := s.store.DeletePendingBlob(ctx, id); err != nil {
		s.logger.Warn("files: deleting an upload not kept failed; the collector will", "blob", id, "err", err)
	}
}

// Get returns owner's file id. ErrNotFound when there is none, or it is
// another owner's.
func (s *Service) Get(ctx context.Context, owner string, id uuid.UUID) (File, error) {
	sf, err := s.store.File(ctx, owner, id)
	if err != nil {
		return File{}, err
	}
	return sf.File, nil
}

// Open returns bytes [off, off+n) of file f (n < 0, or past the end: to
// the end), read from the store as they are consumed. f is looked up
// again by its ID and Owner: ErrNotFound when it is gone. An off outside
// [0, f.Size] is a conversation.Error (invalid).
func (s *Service) Open(ctx context.Context, f File, off, n int64) (io.ReadCloser, error) {
	sf, err := s.store.File(ctx, f.Owner, f.ID)
	if err != nil {
		return nil, err
	}
	if off < 0 || off > sf.Size {
		return nil, &conversation.Error{Code: conversation.Invalid,
			Message: fmt.Sprintf("range: offset %d is outside the file's %d bytes", off, sf.Size)}
	}
	if n < 0 || n > sf.Size-off {
		n = sf.Size - off
	}
	if sf.Storage != s.storage {
		return nil, fmt.Errorf("files: file %s is kept in %s storage, and this server uses %s", sf.ID, sf.Storage, s.storage)
	}
	if n == 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	return s.blobs.Get(ctx, sf.BlobID, off, n)
}

// countingReader counts and hashes what it reads, and fails with a
// *TooLargeError once it has read limit+1 bytes, never reading further.
type countingReader struct {
	r     io.Reader
	limit int64
	n     int64
	hash  hash.Hash
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n > c.limit {
		return 0, &TooLargeError{Limit: c.limit}
	}
	if room := c.limit + 1 - c.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.hash.Write(p[:n])
	if c.n > c.limit {
		return n, &TooLargeError{Limit: c.limit}
	}
	if err != nil && err != io.EOF {
		// Upload reads the head with io.ReadFull, whose ErrUnexpectedEOF
		// means "a file shorter than the head": a body cut short (a
		// multipart part's own ErrUnexpectedEOF) must not read as that.
		return n, &cutError{err: err}
	}
	return n, err
}

// cutError is a read error of the upload's reader other than its end.
type cutError struct{ err error }

func (e *cutError) Error() string { return "file: the upload ended before its end: " + e.err.Error() }

// Unwrap lets errors.As find what cut it (a body deadline, say), but not
// errors.Is(io.ErrUnexpectedEOF): see countingReader.Read.
func (e *cutError) Unwrap() error {
	if e.err == io.ErrUnexpectedEOF {
		return nil
	}
	return e.err
}

// Package s3blobs keeps files' bytes in an S3-compatible object store
// (AWS S3, Ceph RGW, Garage, MinIO, R2, VersityGW, …), one object per
// blob under "<prefix>blobs/<blob id>"; their metadata stays in
// PostgreSQL (package files).
//
// Put spools the bytes to a temporary file first: S3 wants an object's
// length up front (or multipart parts of 5 MiB and more, each buffered),
// and an upload's length is known only at its end. The spool keeps memory
// flat whatever the size, and many uploads at once, at the cost of
// writing each upload to local disk once (docs/files.md, "Storing bytes in
// S3").
package s3blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/convo-dev/convo/files"
)

// PartSize is the size of an upload's parts: a blob up to this size
// (the default file size limit included) goes up in one PUT, which the
// store keeps whole or not at all; a larger one in parts of this size.
const PartSize = 64 << 20

// Config says where the blobs live and how to reach them.
type Config struct {
	// Endpoint is the S3 API's host[:port], without a scheme:
	// s3.eu-west-1.amazonaws.com, 127.0.0.1:8333.
	Endpoint string
	// Bucket must exist; New checks.
	Bucket string
	// Region of the bucket; empty: asked of the server.
	Region    string
	AccessKey string
	SecretKey string
	// Insecure speaks plain HTTP rather than HTTPS (a store on localhost
	// or a private network).
	Insecure bool
	// Prefix goes before every key ("convo/" keeps convo's objects apart
	// in a shared bucket); empty: none.
	Prefix string
	// TempDir holds uploads being spooled; empty: os.TempDir() (TMPDIR).
	TempDir string
}

// Store is the files.Blobs on an S3 bucket. Its methods are safe for concurrent use.
type Store struct {
	client  *minio.Client
	core    minio.Core
	bucket  string
	prefix  string
	tempDir string
}

var _ files.Blobs = (*Store)(nil)

// New returns a Store on cfg's bucket after checking the configuration:
// errors name what is wrong (a missing field, an endpoint given as a URL,
// a bucket that does not exist or that the keys may not reach, a spool
// directory that cannot be written).
func New(ctx context.Context, cfg Config) (*Store, error) {
	switch {
	case cfg.Endpoint == "":
		return nil, errors.New("S3 endpoint: required (host[:port])")
	case strings.Contains(cfg.Endpoint, "://") || strings.Contains(cfg.Endpoint, "/"):
		return nil, fmt.Errorf("S3 endpoint %q: want host[:port] without a scheme or path (plain HTTP is the insecure setting)", cfg.Endpoint)
	case cfg.Bucket == "":
		return nil, errors.New("S3 bucket: required")
	case cfg.AccessKey == "" || cfg.SecretKey == "":
		return nil, errors.New("S3 access key and secret key: both required")
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: !cfg.Insecure,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %q: %w", cfg.Endpoint, err)
	}
	s := &Store{client: client, core: minio.Core{Client: client}, bucket: cfg.Bucket, prefix: cfg.Prefix, tempDir: cfg.TempDir}
	if s.tempDir == "" {
		s.tempDir = os.TempDir()
	}
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ok, err := client.BucketExists(checkCtx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("S3 bucket %q at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	if !ok {
		return nil, fmt.Errorf("S3 bucket %q does not exist at %s: create it first (convo does not create buckets)", cfg.Bucket, cfg.Endpoint)
	}
	f, err := os.CreateTemp(s.tempDir, "convo-blob-*")
	if err != nil {
		return nil, fmt.Errorf("S3 uploads' spool directory: %w", err)
	}
	f.Close()
	os.Remove(f.Name())
	return s, nil
}

// key is blob id's object key.
func (s *Store) key(id uuid.UUID) string { return s.prefix + "blobs/" + id.String() }

// Put stores the bytes of r, read to EOF, as blob id and returns how many
// there were. They are spooled to a temporary file (removed before Put
// returns) and then uploaded with their length; memory use does not depend
// on their size. On error (r's, the disk's, the store's, ctx's) no object
// of id is left behind: a single PUT is not stored unless complete, and
// minio-go aborts a failed multipart upload.
func (s *Store) Put(ctx context.Context, id uuid.UUID, r io.Reader) (int64, error) {
	f, err := os.CreateTemp(s.tempDir, "convo-blob-*")
	if err != nil {
		return 0, fmt.Errorf("spool blob %s: %w", id, err)
	}
	// Unlinked at once where the system allows it (Unix), so that even a
	// crash leaves no spool file behind: the open file keeps the bytes.
	name := f.Name()
	unlinked := os.Remove(name) == nil
	defer func() {
		f.Close()
		if !unlinked {
			os.Remove(name)
		}
	}()
	n, err := io.Copy(f, ctxReader{ctx, r})
	if err != nil {
		return 0, fmt.Errorf("spool blob %s: %w", id, err)
	}
	// From an io.ReaderAt with its length, minio-go buffers nothing: one
	// PUT up to PartSize, over it a multipart upload whose parts are
	// sections of the file (4 at a time).
	_, err = s.client.PutObject(ctx, s.bucket, s.key(id), io.NewSectionReader(f, 0, n), n,
		minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: PartSize})
	if err != nil {
		return 0, fmt.Errorf("store blob %s in S3 bucket %q: %w", id, s.bucket, err)
	}
	return n, nil
}

// Get returns bytes [off, off+n) of blob id, n < 0 meaning to the end
// (nothing when off is at or past it). A range of n bytes the blob does
// not hold entirely reads what there is, then fails with
// io.ErrUnexpectedEOF (errors.Is), as postgres.FileBlobs does: a caller
// that promised n bytes learns that it cannot keep its word.
// ErrNotFound when there is no such blob.
func (s *Store) Get(ctx context.Context, id uuid.UUID, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("read blob %s: negative offset %d", id, off)
	}
	var opts minio.GetObjectOptions
	switch {
	case n == 0:
		// No bytes to read; still say whether the blob exists.
		if _, err := s.client.StatObject(ctx, s.bucket, s.key(id), minio.StatObjectOptions{}); err != nil {
			return nil, s.readError(id, err)
		}
		return io.NopCloser(strings.NewReader("")), nil
	case n < 0 && off > 0:
		if err := opts.SetRange(off, 0); err != nil {
			return nil, err
		}
	case n > 0:
		if err := opts.SetRange(off, off+n-1); err != nil {
			return nil, err
		}
	}
	body, _, _, err := s.core.GetObject(ctx, s.bucket, s.key(id), opts)
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.InvalidRange {
			// The blob exists; the range starts at or past its end.
			body = io.NopCloser(strings.NewReader(""))
		} else {
			return nil, s.readError(id, err)
		}
	}
	if n < 0 {
		return body, nil
	}
	return &rangeReader{ReadCloser: body, id: id, end: off + n, pos: off}, nil
}

// rangeReader fails with io.ErrUnexpectedEOF at the end of a body shorter
// than the range asked for (S3 cuts a range at the object's end).
type rangeReader struct {
	io.ReadCloser
	id       uuid.UUID
	pos, end int64
}

func (r *rangeReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.pos += int64(n)
	if err == io.EOF && r.pos < r.end {
		err = fmt.Errorf("read blob %s: it ends before byte %d: %w", r.id, r.end, io.ErrUnexpectedEOF)
	}
	return n, err
}

// Delete removes blob id; a missing blob is not an error.
func (s *Store) Delete(ctx context.Context, id uuid.UUID) error {
	err := s.client.RemoveObject(ctx, s.bucket, s.key(id), minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchKey {
		return fmt.Errorf("delete blob %s from S3 bucket %q: %w", id, s.bucket, err)
	}
	return nil
}

func (s *Store) readError(id uuid.UUID, err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket) {
		return files.ErrNotFound
	}
	return fmt.Errorf("read blob %s from S3 bucket %q: %w", id, s.bucket, err)
}

// ctxReader ends a copy when ctx ends, so that a cancelled upload stops
// spooling a reader that would go on.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

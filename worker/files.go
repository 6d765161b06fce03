package worker

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// File is a file a user message holds (an image, a PDF, a document the
// user attached), as a model's context gives it: its metadata and a way
// to read its bytes.
type File struct {
	ID       string
	Filename string
	// MediaType is the type decided from the bytes when the file was
	// uploaded, for example "image/png" or "text/plain; charset=utf-8".
	MediaType string
	Size      int64
	SHA256    string // lower-case hex
	// Storage says where the bytes are: "postgres" (Open reads them
	// through convo.file_chunk) or "s3" (the object BlobID of the
	// server's bucket, which Open reads through Config.Blobs when it is
	// set).
	Storage string
	BlobID  string

	open func(ctx context.Context) (io.ReadCloser, error)
}

// ErrFileUnavailable is the error of Open for a file whose bytes this
// runtime cannot reach (a file in S3 without Config.Blobs): a model says
// the file is attached but not shown, rather than fail the reply.
var ErrFileUnavailable = errors.New("the file's bytes are not available to this worker")

// NewFile returns f whose bytes open reads: for tests, and for a model
// that wraps another's context.
func NewFile(f File, open func(ctx context.Context) (io.ReadCloser, error)) File {
	f.open = open
	return f
}

// Open returns a reader of the file's bytes, read as it is consumed (a
// chunk of 256 KiB at a time from PostgreSQL; streamed from S3 with
// Config.Blobs); at the end it checks their size and SHA-256 against the
// file's, failing the read when they differ (and as soon as more bytes
// than the size arrive). A reader of PostgreSQL's bytes belongs to the
// prompt: it fails once the worker no longer holds the prompt. An error
// wrapping ErrFileUnavailable when the bytes cannot be reached from here.
func (f File) Open(ctx context.Context) (io.ReadCloser, error) {
	if f.open == nil {
		if f.Storage != "" && f.Storage != "postgres" {
			return nil, fmt.Errorf("file %s (%s): its bytes are in %s (object %s): %w", f.ID, f.Filename, f.Storage, f.BlobID, ErrFileUnavailable)
		}
		return nil, fmt.Errorf("file %s (%s): %w", f.ID, f.Filename, ErrFileUnavailable)
	}
	return f.open(ctx)
}

// Read returns the file's first max bytes (all of them when max < 0 or
// the file is no longer), and whether it had more.
func (f File) Read(ctx context.Context, max int64) (data []byte, cut bool, err error) {
	rc, err := f.Open(ctx)
	if err != nil {
		return nil, false, err
	}
	defer rc.Close()
	var r io.Reader = rc
	if max >= 0 {
		r = io.LimitReader(rc, max+1)
	}
	data, err = io.ReadAll(r)
	if err != nil {
		return nil, false, fmt.Errorf("read file %s (%s): %w", f.ID, f.Filename, err)
	}
	if max >= 0 && int64(len(data)) > max {
		return data[:max], true, nil
	}
	return data, false, nil
}

// baseType is the media type without its parameters, in lower case.
func (f File) baseType() string {
	t, _, _ := strings.Cut(f.MediaType, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// IsImage reports whether the file is an image every vision model reads:
// PNG, JPEG, GIF or WebP (never SVG, which is markup).
func (f File) IsImage() bool {
	switch f.baseType() {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// IsPDF reports whether the file is a PDF.
func (f File) IsPDF() bool { return f.baseType() == "application/pdf" }

// IsText reports whether the file is text a model reads as it is: text/*
// and JSON.
func (f File) IsText() bool {
	t := f.baseType()
	return strings.HasPrefix(t, "text/") || t == "application/json" || strings.HasSuffix(t, "+json")
}

// DataURL is a data: URL of data with the file's media type (without its
// parameters), as providers take images and PDFs inline.
func (f File) DataURL(data []byte) string {
	return "data:" + f.baseType() + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// Describe names the file for a model or a person: its filename, media
// type and size, as in "notes.txt (text/plain, 1.2 KB)".
func (f File) Describe() string {
	return fmt.Sprintf("%s (%s, %s)", f.Filename, f.baseType(), HumanBytes(f.Size))
}

// HumanBytes writes n bytes in B, KB, MB or GB (powers of 1000, one
// decimal below 10).
func HumanBytes(n int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB"}
	v, u := float64(n), 0
	for v >= 1000 && u < len(units)-1 {
		v /= 1000
		u++
	}
	switch {
	case u == 0:
		return fmt.Sprintf("%d B", n)
	case v < 10:
		return fmt.Sprintf("%.1f %s", v, units[u])
	}
	return fmt.Sprintf("%.0f %s", v, units[u])
}

// LastUserFiles returns the files of the last user message of req.
func (req Request) LastUserFiles() []File {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == RoleUser {
			return req.Messages[i].Files
		}
	}
	return nil
}

// promptFiles turns convo.prompt_files' rows into Files by message, each
// read through convo.file_chunk as this run's worker, or from
// Config.Blobs when it is in S3.
func (r *run) promptFiles(rows []wdb.WorkerPromptReadRow) map[uuid.UUID][]File {
	out := map[uuid.UUID][]File{}
	for _, row := range rows {
		f := File{
			ID: row.FileID.String(), Filename: row.Filename, MediaType: row.MediaType, Size: row.Size,
			SHA256: row.Sha256, Storage: row.Storage, BlobID: row.BlobID.String(),
		}
		switch blobs := r.p.cfg.Blobs; {
		case row.Storage == files.StoragePostgres:
			fileID, chunks := row.FileID, row.Chunks
			f.open = func(ctx context.Context) (io.ReadCloser, error) {
				return &chunkReader{ctx: ctx, r: r, file: f, id: fileID, chunks: chunks, hash: sha256.New()}, nil
			}
		case row.Storage == files.StorageS3 && blobs != nil:
			blobID := row.BlobID
			f.open = func(ctx context.Context) (io.ReadCloser, error) {
				rc, err := blobs.Get(ctx, blobID, 0, -1)
				if errors.Is(err, files.ErrNotFound) {
					return nil, fmt.Errorf("file %s (%s): its bytes (object %s) are not in the bucket", f.ID, f.Filename, f.BlobID)
				} else if err != nil {
					return nil, fmt.Errorf("file %s (%s): %w", f.ID, f.Filename, err)
				}
				return &blobReader{rc: rc, r: io.LimitReader(rc, f.Size+1), file: f, hash: sha256.New()}, nil
			}
		}
		out[row.MessageID] = append(out[row.MessageID], f)
	}
	return out
}

// blobReader reads a file's bytes from Config.Blobs, checking them as
// chunkReader does: the size as they come, the SHA-256 at the end.
type blobReader struct {
	rc   io.ReadCloser
	r    io.Reader // rc, cut one byte past the size
	file File
	read int64
	hash hash.Hash
	err  error
}

func (b *blobReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	b.hash.Write(p[:n])
	switch {
	case b.read > b.file.Size:
		b.err = fmt.Errorf("file %s (%s): the stored bytes are more than its %d", b.file.ID, b.file.Filename, b.file.Size)
		return 0, b.err
	case err == io.EOF:
		if b.err = checkRead(b.file, b.read, b.hash); b.err == nil {
			b.err = io.EOF
		}
	case err != nil:
		b.err = fmt.Errorf("read file %s (%s): %w", b.file.ID, b.file.Filename, err)
	}
	if b.err != nil && b.err != io.EOF {
		return 0, b.err
	}
	return n, err
}

func (b *blobReader) Close() error {
	if b.err == nil {
		b.err = errors.New("read after close")
	}
	return b.rc.Close()
}

// chunkReader reads a file's chunks in order, one convo.file_chunk call
// each, as they are consumed: a file costs the memory of one chunk.
type chunkReader struct {
	ctx    context.Context
	r      *run
	file   File
	id     uuid.UUID
	chunks int32
	seq    int32
	buf    []byte
	read   int64
	hash   interface {
		io.Writer
		Sum([]byte) []byte
	}
	err error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if c.seq >= c.chunks {
			c.err = c.check()
			if c.err == nil {
				c.err = io.EOF
			}
			return 0, c.err
		}
		data, err := c.chunk()
		if err != nil {
			c.err = err
			return 0, err
		}
		c.seq++
		c.read += int64(len(data))
		c.hash.Write(data)
		c.buf = data
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

// chunk reads chunk c.seq, within the pool's call timeout.
func (c *chunkReader) chunk() ([]byte, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.r.p.cfg.CallTimeout)
	defer cancel()
	data, err := c.r.p.api.WorkerFileChunk(ctx, wdb.WorkerFileChunkParams{
		PromptID: c.r.claim.PromptID, Worker: c.r.worker, FileID: c.id, Seq: c.seq,
	})
	if err != nil {
		return nil, fmt.Errorf("read file %s (%s), chunk %d: %s", c.file.ID, c.file.Filename, c.seq, sqlMessage(err))
	}
	return data, nil
}

// check compares what was read with the file's size and SHA-256.
func (c *chunkReader) check() error { return checkRead(c.file, c.read, c.hash) }

// checkRead compares the count and hash of the bytes read of f with its
// size and SHA-256.
func checkRead(f File, read int64, h interface{ Sum([]byte) []byte }) error {
	if read != f.Size {
		return fmt.Errorf("file %s (%s): read %d bytes, want %d", f.ID, f.Filename, read, f.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
		return fmt.Errorf("file %s (%s): the bytes read have SHA-256 %s, want %s", f.ID, f.Filename, sum, f.SHA256)
	}
	return nil
}

func (c *chunkReader) Close() error {
	c.buf = nil
	if c.err == nil {
		c.err = errors.New("read after close")
	}
	return nil
}

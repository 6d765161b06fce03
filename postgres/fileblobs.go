package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/postgres/dbq"
)

// FileChunkBytes is the size of a chunk of convo.file_chunks: every chunk
// of a blob but its last holds exactly this many bytes, so the chunks of a
// byte range are known from the range alone.
const FileChunkBytes = 256 << 10

// fileReadChunks is how many chunks one read of a download fetches: 1 MiB
// a query, held in memory while it is consumed.
const fileReadChunks = 4

// FileBlobs is the files.Blobs in PostgreSQL, the default: a blob's bytes
// are rows of convo.file_chunks of FileChunkBytes each. The blob's row in
// convo.file_blobs must exist before Put (the files.Service writes it).
type FileBlobs struct {
	q *dbq.Queries
}

var _ files.Blobs = (*FileBlobs)(nil)

// NewFileBlobs returns the FileBlobs of pool's (migrated) database.
func NewFileBlobs(pool *pgxpool.Pool) *FileBlobs {
	return &FileBlobs{q: dbq.New(pool)}
}

// Put implements files.Blobs: each chunk is written in a statement of its
// own as soon as it has arrived, so memory holds one chunk per upload and
// no connection is held while the uploader is slow. On error the chunks
// written are deleted (should that fail too, the blob stays pending and
// the collector removes it).
func (b *FileBlobs) Put(ctx context.Context, id uuid.UUID, r io.Reader) (int64, error) {
	buf := make([]byte, FileChunkBytes)
	var total int64
	for seq := int32(0); ; seq++ {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			err := b.q.FileChunkInsert(ctx, dbq.FileChunkInsertParams{BlobID: id, Seq: seq, Data: buf[:n]})
			if err != nil {
				b.undo(ctx, id)
				return 0, translate(err, "write a file chunk")
			}
			total += int64(n)
		}
		switch {
		case rerr == nil:
			continue
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			return total, nil
		default:
			b.undo(ctx, id)
			return 0, fmt.Errorf("read the bytes: %w", rerr)
		}
	}
}

func (b *FileBlobs) undo(ctx context.Context, id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = b.Delete(ctx, id) // failing, the blob stays pending: the collector's
}

// Get implements files.Blobs: the reader fetches fileReadChunks chunks a
// query, only those of the range (their primary key's range), as it is
// read; it holds no connection between reads. ErrNotFound when the blob
// has no bytes here.
func (b *FileBlobs) Get(ctx context.Context, id uuid.UUID, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("read blob %s: negative offset %d", id, off)
	}
	exists, err := b.q.FileChunkFirstExists(ctx, id)
	if err != nil {
		return nil, translate(err, "read a file")
	}
	if !exists {
		return nil, files.ErrNotFound
	}
	rd := &chunkReader{q: b.q, ctx: ctx, id: id, pos: off, end: -1}
	if n >= 0 {
		rd.end = off + n
	}
	return rd, nil
}

// Delete implements files.Blobs.
func (b *FileBlobs) Delete(ctx context.Context, id uuid.UUID) error {
	return translate(b.q.FileChunksDelete(ctx, id), "delete a file's bytes")
}

// chunkReader reads bytes [pos, end) of a blob (end < 0: to the end),
// fetching a few chunks at a time.
type chunkReader struct {
	q   *dbq.Queries
	ctx context.Context
	id  uuid.UUID
	pos int64 // the offset of the next byte to return
	end int64
	// buf holds bytes from pos on, of the chunks fetched last.
	buf  []byte
	done bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.end >= 0 && r.pos >= r.end {
		return 0, io.EOF
	}
	if len(r.buf) == 0 {
		if r.done {
			return r.endOfBlob()
		}
		if err := r.fetch(); err != nil {
			return 0, err
		}
		if len(r.buf) == 0 {
			return r.endOfBlob()
		}
	}
	if r.end >= 0 && int64(len(p)) > r.end-r.pos {
		p = p[:r.end-r.pos]
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	r.pos += int64(n)
	return n, nil
}

// endOfBlob is what Read returns at the blob's last byte: io.EOF, or
// io.ErrUnexpectedEOF when the range asked for more (the blob was deleted
// meanwhile, or is shorter than its record).
func (r *chunkReader) endOfBlob() (int, error) {
	if r.end >= 0 && r.pos < r.end {
		return 0, fmt.Errorf("read blob %s: it ends before byte %d: %w", r.id, r.end, io.ErrUnexpectedEOF)
	}
	return 0, io.EOF
}

// fetch reads the chunks from the one holding pos, and keeps in buf the
// bytes from pos on.
func (r *chunkReader) fetch() error {
	from := r.pos / FileChunkBytes
	to := from + fileReadChunks
	if r.end >= 0 {
		to = min(to, (r.end+FileChunkBytes-1)/FileChunkBytes)
	}
	rows, err := r.q.FileChunks(r.ctx, dbq.FileChunksParams{BlobID: r.id, FromSeq: int32(from), ToSeq: int32(to)})
	if err != nil {
		return translate(err, "read a file")
	}
	r.buf = r.buf[:0]
	for i, row := range rows {
		switch {
		case int64(row.Seq) != from+int64(i):
			return fmt.Errorf("read blob %s: chunk %d is missing", r.id, from+int64(i))
		case len(row.Data) < FileChunkBytes && i < len(rows)-1:
			return fmt.Errorf("read blob %s: chunk %d is short", r.id, row.Seq)
		}
		data := row.Data
		if i == 0 {
			data = data[min(r.pos-from*FileChunkBytes, int64(len(data))):]
		}
		r.buf = append(r.buf, data...)
	}
	// Fewer chunks than asked, or a short one: that was the last.
	if int64(len(rows)) < to-from || (len(rows) > 0 && len(rows[len(rows)-1].Data) < FileChunkBytes) {
		r.done = true
	}
	return nil
}

// Close implements io.Closer; the reader holds nothing to release.
func (r *chunkReader) Close() error {
	r.buf = nil
	r.done = true
	return nil
}

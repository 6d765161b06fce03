package s3blobs_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"

	"github.com/convo-dev/convo/files/s3blobs"
	"github.com/convo-dev/convo/internal/s3test"
)

// benchSizes are an image, a large file and the default size limit.
var benchSizes = []int{256 << 10, 4 << 20, 25 << 20}

// BenchmarkS3Put measures Store.Put (spool to a temporary file, then
// upload with the length) against versitygw, and the server's own limit: a
// plain minio-go PutObject of the same bytes from memory with their
// length (no convo code). MB/s.
func BenchmarkS3Put(b *testing.B) {
	bucket := s3test.Start(b)
	cfg := config(bucket)
	cfg.TempDir = b.TempDir()
	store, err := s3blobs.New(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	warmUp(b, store)
	for _, size := range benchSizes {
		data := bytes.Repeat([]byte("convo blob bytes"), size/16)
		b.Run(fmt.Sprintf("store/%s", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := store.Put(b.Context(), uuid.New(), bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("minio-go/%s", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				_, err := bucket.Client.PutObject(b.Context(), bucket.Name, "baseline/"+uuid.NewString(),
					bytes.NewReader(data), int64(size), minio.PutObjectOptions{})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkS3Get measures Store.Get of a whole blob read to its end, and
// the baseline: minio-go's GetObject of the same object.
func BenchmarkS3Get(b *testing.B) {
	bucket := s3test.Start(b)
	store, err := s3blobs.New(b.Context(), config(bucket))
	if err != nil {
		b.Fatal(err)
	}
	warmUp(b, store)
	buf := make([]byte, 32<<10)
	for _, size := range benchSizes {
		id := uuid.New()
		if _, err := store.Put(b.Context(), id, bytes.NewReader(bytes.Repeat([]byte("convo blob bytes"), size/16))); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("store/%s", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				rc, err := store.Get(b.Context(), id, 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				readAll(b, rc, buf, size)
			}
		})
		b.Run(fmt.Sprintf("minio-go/%s", sizeName(size)), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				obj, err := bucket.Client.GetObject(b.Context(), bucket.Name, "blobs/"+id.String(), minio.GetObjectOptions{})
				if err != nil {
					b.Fatal(err)
				}
				readAll(b, obj, buf, size)
			}
		})
	}
}

func readAll(b *testing.B, rc io.ReadCloser, buf []byte, size int) {
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{rc}, buf)
	rc.Close()
	if err != nil || n != int64(size) {
		b.Fatalf("read %d bytes, %v; want %d", n, err, size)
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// warmUp stores and reads a blob first, so that no variant is timed with
// the bucket's first write (the server's first object, its connections
// and directories).
func warmUp(b *testing.B, store *s3blobs.Store) {
	id := uuid.New()
	if _, err := store.Put(b.Context(), id, bytes.NewReader(make([]byte, 1<<20))); err != nil {
		b.Fatal(err)
	}
	rc, err := store.Get(b.Context(), id, 0, -1)
	if err != nil {
		b.Fatal(err)
	}
	readAll(b, rc, make([]byte, 32<<10), 1<<20)
}

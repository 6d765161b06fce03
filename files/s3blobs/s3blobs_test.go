package s3blobs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/files/blobstest"
	"github.com/convo-dev/convo/files/s3blobs"
	"github.com/convo-dev/convo/internal/s3test"
)

func TestMain(m *testing.M) { s3test.Main(m) }

func config(b s3test.Bucket) s3blobs.Config {
	return s3blobs.Config{Endpoint: b.Endpoint, Bucket: b.Name, Region: b.Region,
		AccessKey: b.AccessKey, SecretKey: b.SecretKey, Insecure: true}
}

func newStore(t *testing.T, cfg s3blobs.Config) *s3blobs.Store {
	t.Helper()
	s, err := s3blobs.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs the blob stores' conformance suite, memory check
// included (not parallel, so that nothing else moves the heap it measures).
func TestConformance(t *testing.T) {
	blobstest.Run(t, func(t *testing.T) files.Blobs {
		cfg := config(s3test.Start(t))
		cfg.TempDir = t.TempDir()
		return newStore(t, cfg)
	}, "")
}

// TestKeysAndSpool: blobs are stored under "<prefix>blobs/<id>", and the
// spool file of a Put is gone once it returns.
func TestKeysAndSpool(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	cfg := config(b)
	cfg.Prefix = "convo/"
	cfg.TempDir = t.TempDir()
	s := newStore(t, cfg)
	id := uuid.New()
	if _, err := s.Put(t.Context(), id, strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	info, err := b.Client.StatObject(t.Context(), b.Name, "convo/blobs/"+id.String(), minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("the object under convo/blobs/%s: %v", id, err)
	}
	if info.Size != 5 {
		t.Errorf("object size %d, want 5", info.Size)
	}
	left, err := os.ReadDir(cfg.TempDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the spool directory holds %d files after Put, want none", len(left))
	}
}

// TestNewRefuses: a configuration that cannot work is refused at start,
// the error naming what is wrong.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	good := config(b)
	for _, c := range []struct {
		name string
		edit func(*s3blobs.Config)
		want string
	}{
		{"no endpoint", func(c *s3blobs.Config) { c.Endpoint = "" }, "S3 endpoint: required"},
		{"a URL as endpoint", func(c *s3blobs.Config) { c.Endpoint = "http://" + c.Endpoint }, "without a scheme"},
		{"no bucket", func(c *s3blobs.Config) { c.Bucket = "" }, "S3 bucket: required"},
		{"no secret key", func(c *s3blobs.Config) { c.SecretKey = "" }, "secret key: both required"},
		{"a bucket that does not exist", func(c *s3blobs.Config) { c.Bucket = "no-such-bucket-here" },
			`S3 bucket "no-such-bucket-here" does not exist`},
		{"wrong keys", func(c *s3blobs.Config) { c.SecretKey = "wrong" }, `S3 bucket "` + b.Name + `"`},
		{"a spool directory that does not exist", func(c *s3blobs.Config) { c.TempDir = "/nonexistent/spool" },
			"spool directory"},
	} {
		cfg := good
		c.edit(&cfg)
		_, err := s3blobs.New(t.Context(), cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestMultipart: a blob larger than PartSize goes up in parts, from
// sections of the spool file, and reads back whole and by ranges across a
// part boundary.
func TestMultipart(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	cfg := config(b)
	cfg.TempDir = t.TempDir()
	s := newStore(t, cfg)
	const size = s3blobs.PartSize + 12345
	src := rand.NewChaCha8([32]byte{9})
	want := sha256.New()
	id := uuid.New()
	n, err := s.Put(t.Context(), id, io.TeeReader(io.LimitReader(src, size), want))
	if err != nil || n != size {
		t.Fatalf("Put of %d bytes: %d, %v", size, n, err)
	}
	info, err := b.Client.StatObject(t.Context(), b.Name, "blobs/"+id.String(), minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A multipart upload's ETag is "<md5 of the parts' md5s>-<parts>".
	if !strings.HasSuffix(info.ETag, "-2") {
		t.Errorf("ETag %q: want a multipart upload of 2 parts", info.ETag)
	}
	rc, err := s.Get(t.Context(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	read, err := io.Copy(got, rc)
	rc.Close()
	if err != nil || read != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("read back %d bytes (%v), not the %d put", read, err, size)
	}
	// The 100 bytes across the part boundary are the generator's.
	all := make([]byte, s3blobs.PartSize+50)
	rand.NewChaCha8([32]byte{9}).Read(all)
	rc, err = s.Get(t.Context(), id, s3blobs.PartSize-50, 100)
	if err != nil {
		t.Fatal(err)
	}
	part, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(part, all[s3blobs.PartSize-50:]) {
		t.Errorf("range across the part boundary: %d bytes (%v), not the ones put", len(part), err)
	}
}

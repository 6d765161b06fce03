package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/files/s3blobs"
	"github.com/convo-dev/convo/internal/s3test"
	"github.com/convo-dev/convo/postgres"

	. "github.com/convo-dev/convo/worker"
)

// TestFilesInS3 runs the demo model, as a login of the worker role, on
// messages holding text files whose bytes are in a real S3 bucket. With
// Config.Blobs the runtime reads them from the bucket: the reply names
// the file's first line, and an object whose bytes no longer match the
// file's SHA-256 (or size) fails the reply, naming the file. Without
// Blobs the demo says the bytes are not available.
func TestFilesInS3(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	ctx := context.Background()
	store, err := s3blobs.New(ctx, s3blobs.Config{
		Endpoint: b.Endpoint, Bucket: b.Name, Region: b.Region, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Insecure: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	upload := func(t *testing.T, tb *testBundle, name, data string) files.File {
		t.Helper()
		svc := files.NewService(files.Options{Store: postgres.NewFileStore(tb.db), Blobs: store, Storage: files.StorageS3})
		f, err := svc.Upload(ctx, "local", name, "", strings.NewReader(data))
		if err != nil {
			t.Fatalf("upload %s: %v", name, err)
		}
		return f
	}
	// blobOf is the object of file f.
	blobOf := func(t *testing.T, tb *testBundle, f files.File) string {
		t.Helper()
		var blob uuid.UUID
		if err := tb.db.QueryRow(ctx, `SELECT blob_id FROM convo.files WHERE id = $1`, f.ID).Scan(&blob); err != nil {
			t.Fatal(err)
		}
		return "blobs/" + blob.String()
	}
	replace := func(t *testing.T, key, data string) {
		t.Helper()
		if _, err := b.Client.PutObject(ctx, b.Name, key, strings.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("with Blobs", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.useWorkerRole(t)
		notes := upload(t, tb, "notes.txt", "Hello from the bucket\nsecond line\n")
		_, res := tb.start(t, Config{Blobs: store})
		s := tb.sendFiles(t, uuid.Nil, "What is in it?", `{}`, notes.ID)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		if text, want := tb.replyText(t, s), `You attached notes.txt (text/plain, 34 B); its first line: "Hello from the bucket".`; !strings.Contains(text, want) {
			t.Errorf("the reply does not say %q:\n%s", want, text)
		}

		for _, c := range []struct{ name, stored, says string }{
			{"changed.txt", "Hello from somewhere!\n", "the bytes read have SHA-256"},
			{"longer.txt", "Hello from the bucket, and more\n", "the stored bytes are more than its 22"},
			{"shorter.txt", "Hello\n", "read 6 bytes, want 22"},
		} {
			f := upload(t, tb, c.name, "Hello from the bucket\n")
			replace(t, blobOf(t, tb, f), c.stored)
			s := tb.sendFiles(t, s.conversationID, "", `{}`, f.ID)
			r := res.wait(t, s.promptID, 20*time.Second)
			if r.Outcome != OutcomeFailed || r.Err == nil || !strings.Contains(r.Err.Error(), c.says) || !strings.Contains(r.Err.Error(), c.name) {
				t.Errorf("%s, its object now %q: outcome %s, %v; want failed, naming the file and saying %q", c.name, c.stored, r.Outcome, r.Err, c.says)
			}
		}

		gone := upload(t, tb, "gone.txt", "soon gone\n")
		if err := b.Client.RemoveObject(ctx, b.Name, blobOf(t, tb, gone), minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		s = tb.sendFiles(t, s.conversationID, "", `{}`, gone.ID)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeFailed || r.Err == nil || !strings.Contains(r.Err.Error(), "are not in the bucket") {
			t.Errorf("a file whose object is gone: outcome %s, %v; want failed, saying its bytes are not in the bucket", r.Outcome, r.Err)
		}
	})

	t.Run("without Blobs", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		notes := upload(t, tb, "notes.txt", "Hello from the bucket\n")
		_, res := tb.start(t, Config{})
		s := tb.sendFiles(t, uuid.Nil, "", `{}`, notes.ID)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		if text, want := tb.replyText(t, s), "You attached notes.txt (text/plain, 22 B); its bytes are not available to this worker"; !strings.Contains(text, want) {
			t.Errorf("the reply does not say %q:\n%s", want, text)
		}
	})
}

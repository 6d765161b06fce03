package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/postgres"
)

// fileService returns a files.Service on a new database, with the
// PostgreSQL stores, and the test bundle of that database.
func fileService(t testing.TB, limits files.Limits) (*files.Service, *testBundle) {
	t.Helper()
	tb := setup(t)
	svc := files.NewService(files.Options{
		Store: postgres.NewFileStore(tb.pool), Blobs: postgres.NewFileBlobs(tb.pool), Limits: limits,
	})
	return svc, tb
}

// randomBytes returns n bytes that sniff as application/octet-stream.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	// A leading zero byte: never text, never a known signature.
	b[0] = 0
	return b
}

// count returns the answer of a count(*) query.
func (tb *testBundle) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := tb.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func readAll(t testing.TB, svc *files.Service, f files.File, off, n int64) []byte {
	t.Helper()
	rc, err := svc.Open(context.Background(), f, off, n)
	if err != nil {
		t.Fatalf("open %d+%d: %v", off, n, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %d+%d: %v", off, n, err)
	}
	return got
}

func TestFileUploadRoundTrip(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	ctx := context.Background()
	data := randomBytes(3*postgres.FileChunkBytes+1234, 1)
	f, err := svc.Upload(ctx, "alice", "data.bin", "", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if f.SHA256 != hex.EncodeToString(sum[:]) || f.Size != int64(len(data)) || f.Filename != "data.bin" ||
		f.MediaType != "application/octet-stream" || f.Owner != "alice" || f.CreatedAt.IsZero() {
		t.Errorf("uploaded %+v", f)
	}
	got, err := svc.Get(ctx, "alice", f.ID)
	if err != nil || got != f {
		t.Errorf("Get = %+v, %v; want %+v", got, err, f)
	}
	if !bytes.Equal(readAll(t, svc, f, 0, -1), data) {
		t.Error("the bytes read back differ")
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_chunks`); n != 4 {
		t.Errorf("%d chunks, want 4 of 256 KiB", n)
	}
	// Another owner's file is not found, by Get or Open.
	if _, err := svc.Get(ctx, "bob", f.ID); !errors.Is(err, files.ErrNotFound) {
		t.Errorf("bob's Get = %v, want ErrNotFound", err)
	}
	if _, err := svc.Open(ctx, files.File{ID: f.ID, Owner: "bob"}, 0, -1); !errors.Is(err, files.ErrNotFound) {
		t.Errorf("bob's Open = %v, want ErrNotFound", err)
	}
	if _, err := svc.Get(ctx, "alice", uuid.New()); conversation.ErrorCode(err) != conversation.NotFound {
		t.Errorf("unknown id: %v, want not_found", err)
	}
	// An empty filename is "file".
	f2, err := svc.Upload(ctx, "alice", "", "", bytes.NewReader([]byte("hello")))
	if err != nil || f2.Filename != "file" || f2.MediaType != "text/plain; charset=utf-8" {
		t.Errorf("unnamed upload: %+v, %v", f2, err)
	}
}

func TestFileRangesAcrossChunks(t *testing.T) {
	t.Parallel()
	svc, _ := fileService(t, files.Limits{})
	const c = postgres.FileChunkBytes
	data := randomBytes(9*c+77, 2) // more chunks than one read fetches
	f, err := svc.Upload(context.Background(), "alice", "r.bin", "", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	for _, r := range []struct{ off, n int64 }{
		{0, 1}, {0, c}, {0, c + 1}, {c - 1, 2}, {c, c}, {c - 10, 3*c + 20}, {5*c + 3, -1},
		{size - 1, 1}, {size - 1, 100}, {size, -1}, {2 * c, 0}, {1, size - 1}, {4*c - 1, 4*c + 2},
	} {
		want := data[r.off:]
		if r.n >= 0 && r.n < int64(len(want)) {
			want = want[:r.n]
		}
		if got := readAll(t, svc, f, r.off, r.n); !bytes.Equal(got, want) {
			t.Errorf("range %d+%d: got %d bytes, want %d (or they differ)", r.off, r.n, len(got), len(want))
		}
	}
	for _, off := range []int64{-1, size + 1} {
		if _, err := svc.Open(context.Background(), f, off, 1); conversation.ErrorCode(err) != conversation.Invalid {
			t.Errorf("offset %d: %v, want invalid", off, err)
		}
	}
}

func TestFileDedupe(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	ctx := context.Background()
	data := randomBytes(c2(), 3)
	a, err := svc.Upload(ctx, "alice", "a.bin", "", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Upload(ctx, "alice", "b.bin", "", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || b.Filename != "b.bin" || a.SHA256 != b.SHA256 {
		t.Errorf("second upload %+v, first %+v: want its own id and name", b, a)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_blobs`); n != 1 {
		t.Errorf("%d blobs, want 1 (the copy is discarded)", n)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_chunks`); n != 2 {
		t.Errorf("%d chunks, want 2: one set", n)
	}
	if !bytes.Equal(readAll(t, svc, b, 0, -1), data) {
		t.Error("the second file's bytes differ")
	}
	// Another owner's upload of the same bytes is stored on its own.
	if _, err := svc.Upload(ctx, "bob", "a.bin", "", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_blobs`); n != 2 {
		t.Errorf("%d blobs after bob's upload, want 2", n)
	}
}

func c2() int { return 2 * postgres.FileChunkBytes }

// endless gives zeros (after a PNG's signature) forever, counting them.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	if e.n == 0 && len(p) >= 8 {
		copy(p, "\x89PNG\r\n\x1a\n")
	}
	e.n += int64(len(p))
	return len(p), nil
}

func TestFileTooLargeStopsReading(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	svc, tb := fileService(t, files.Limits{MaxFileBytes: limit})
	r := &endless{}
	_, err := svc.Upload(context.Background(), "alice", "big.png", "image/png", r)
	var tooLarge *files.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Limit != limit {
		t.Fatalf("err = %v, want *TooLargeError of %d", err, limit)
	}
	if !strings.Contains(err.Error(), "1048576 bytes (1 MiB)") || conversation.ErrorCode(err) != conversation.Invalid {
		t.Errorf("message %q (code %s) should name the limit", err, conversation.ErrorCode(err))
	}
	if r.n > limit+postgres.FileChunkBytes {
		t.Errorf("read %d bytes of an endless upload with a limit of %d", r.n, limit)
	}
	for _, table := range []string{"files", "file_blobs", "file_chunks"} {
		if n := tb.count(t, `SELECT count(*) FROM convo.`+table); n != 0 {
			t.Errorf("%d rows in %s after a refused upload", n, table)
		}
	}
	// Exactly the limit is taken.
	if _, err := svc.Upload(context.Background(), "alice", "max.bin", "", bytes.NewReader(randomBytes(limit, 4))); err != nil {
		t.Errorf("an upload of exactly the limit: %v", err)
	}
}

func TestFileQuota(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{MaxUserBytes: 1000})
	ctx := context.Background()
	first := randomBytes(600, 5)
	if _, err := svc.Upload(ctx, "alice", "a", "", bytes.NewReader(first)); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Upload(ctx, "alice", "b", "", bytes.NewReader(randomBytes(401, 6)))
	var quota *files.QuotaError
	if !errors.As(err, &quota) || quota.Limit != 1000 || quota.Used != 600 || quota.Size != 401 {
		t.Fatalf("err = %#v, want *QuotaError 1000/600/401", err)
	}
	if conversation.ErrorCode(err) != conversation.ResourceExhausted || !strings.Contains(err.Error(), "1000 bytes") {
		t.Errorf("%v: code %s", err, conversation.ErrorCode(err))
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_blobs`); n != 1 {
		t.Errorf("%d blobs after a refused upload, want 1", n)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_chunks`); n != 1 {
		t.Errorf("%d chunks after a refused upload, want 1", n)
	}
	// The same bytes again cost nothing; what fits still fits; another
	// user has a quota of their own.
	if _, err := svc.Upload(ctx, "alice", "a again", "", bytes.NewReader(first)); err != nil {
		t.Errorf("a copy of stored bytes: %v", err)
	}
	if _, err := svc.Upload(ctx, "alice", "c", "", bytes.NewReader(randomBytes(400, 7))); err != nil {
		t.Errorf("400 bytes more, up to the limit: %v", err)
	}
	if _, err := svc.Upload(ctx, "bob", "b", "", bytes.NewReader(randomBytes(1000, 8))); err != nil {
		t.Errorf("bob's upload: %v", err)
	}
}

func TestFileRefusals(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	ctx := context.Background()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	html := []byte("<!DOCTYPE html><html><body><script>alert(1)</script></body></html>")
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	exe := append([]byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff"), make([]byte, 64)...)
	for _, c := range []struct {
		name, filename, declared string
		data                     []byte
		check                    func(error) bool
	}{
		{"empty", "e.txt", "", nil, func(err error) bool { return errors.Is(err, files.ErrEmpty) }},
		{"slash", "a/b.png", "", png, isFilenameError},
		{"backslash", `a\b.png`, "", png, isFilenameError},
		{"control", "a\x00b.png", "", png, isFilenameError},
		{"newline", "a\nb.png", "", png, isFilenameError},
		{"long", strings.Repeat("é", 128) + ".png", "", png, isFilenameError},
		{"not utf-8", "a\xffb.png", "", png, isFilenameError},
		{"html as png", "x.png", "image/png", html, isMediaTypeError},
		{"svg as png", "x.png", "image/png", svg, isMediaTypeError},
		{"exe as jpeg", "x.jpg", "image/jpeg", exe, isMediaTypeError},
		{"png as pdf", "x.pdf", "application/pdf", png, isMediaTypeError},
		{"text as html", "x.html", "text/html", []byte("just text"), isMediaTypeError},
		{"malformed type", "x", "png", png, isMediaTypeError},
	} {
		_, err := svc.Upload(ctx, "alice", c.filename, c.declared, bytes.NewReader(c.data))
		if !c.check(err) {
			t.Errorf("%s: err = %v", c.name, err)
		} else if conversation.ErrorCode(err) != conversation.Invalid {
			t.Errorf("%s: code %s, want invalid", c.name, conversation.ErrorCode(err))
		}
	}
	for _, table := range []string{"files", "file_blobs", "file_chunks"} {
		if n := tb.count(t, `SELECT count(*) FROM convo.`+table); n != 0 {
			t.Errorf("%d rows in %s after refused uploads", n, table)
		}
	}
	var mt *files.MediaTypeError
	_, err := svc.Upload(ctx, "alice", "x.png", "image/png", bytes.NewReader(html))
	if !errors.As(err, &mt) || mt.Declared != "image/png" || !strings.HasPrefix(mt.Sniffed, "text/html") ||
		!strings.Contains(err.Error(), "mediaType") {
		t.Errorf("html as png: %v", err)
	}
}

func isFilenameError(err error) bool {
	var fe *files.FilenameError
	return errors.As(err, &fe) && strings.HasPrefix(err.Error(), "filename: ")
}

func isMediaTypeError(err error) bool {
	var me *files.MediaTypeError
	return errors.As(err, &me)
}

func TestFileMediaTypes(t *testing.T) {
	t.Parallel()
	svc, _ := fileService(t, files.Limits{})
	ctx := context.Background()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	for _, c := range []struct {
		declared string
		data     []byte
		want     string
	}{
		{"", png, "image/png"},
		{"application/octet-stream", png, "image/png"},
		{"image/png", png, "image/png"},
		{"text/csv", []byte("name,age\nann,3\n"), "text/csv"},
		{"text/csv", []byte("just some text"), "text/csv"},          // refines text/plain
		{"text/plain", []byte("a,b,c\n1,2,3\n4,5,6\n"), "text/csv"}, // the bytes say more
		{"text/markdown", []byte("# Title\n\ntext"), "text/markdown; charset=utf-8"},
		{"", []byte("%PDF-1.4\n%..."), "application/pdf"},
	} {
		f, err := svc.Upload(ctx, "alice", "f", c.declared, bytes.NewReader(c.data))
		if err != nil || f.MediaType != c.want {
			t.Errorf("declared %q of %.12q: %q, %v; want %q", c.declared, c.data, f.MediaType, err, c.want)
		}
	}
}

// age makes every file and blob look created long ago.
func (tb *testBundle) age(t testing.TB) {
	t.Helper()
	for _, table := range []string{"files", "file_blobs"} {
		if _, err := tb.pool.Exec(context.Background(), `UPDATE convo.`+table+` SET created_at = now() - interval '2 days'`); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFileCollect(t *testing.T) {
	t.Parallel()
	svc, tb := fileService(t, files.Limits{})
	ctx := context.Background()
	upload := func(name string, data []byte) files.File {
		t.Helper()
		f, err := svc.Upload(ctx, "local", name, "", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	alone := upload("alone", randomBytes(c2()+5, 10))
	shared := randomBytes(100, 11)
	sharedA, sharedB := upload("a", shared), upload("b", shared)
	held := upload("held", randomBytes(300, 12))
	inDeleted := upload("in deleted", randomBytes(400, 13))
	// A message holds held, a message of another conversation inDeleted.
	r1 := tb.sendMessage(t, uuid.Nil, "hi")
	r2 := tb.sendMessage(t, uuid.Nil, "bye")
	if _, err := tb.pool.Exec(ctx, `INSERT INTO convo.message_files (message_id, file_id, position) VALUES ($1, $2, 0), ($3, $4, 0)`,
		r1.messageID, held.ID, r2.messageID, inDeleted.ID); err != nil {
		t.Fatal(err)
	}
	// Hold sharedB: sharedA alone goes, and the blob stays.
	if _, err := tb.pool.Exec(ctx, `INSERT INTO convo.message_files (message_id, file_id, position) VALUES ($1, $2, 1)`,
		r1.messageID, sharedB.ID); err != nil {
		t.Fatal(err)
	}
	// A crashed upload: a pending blob with a chunk.
	crashed := uuid.New()
	if _, err := tb.pool.Exec(ctx, `INSERT INTO convo.file_blobs (id, owner, storage) VALUES ($1, 'local', 'postgres');
		`, crashed); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `INSERT INTO convo.file_chunks (blob_id, seq, data) VALUES ($1, 0, '\x00')`, crashed); err != nil {
		t.Fatal(err)
	}

	// Nothing is older than the grace period yet.
	if n, err := svc.Collect(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("Collect before the grace period = %d, %v; want 0", n, err)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_blobs`); n != 5 {
		t.Fatalf("%d blobs, want 5 (4 contents and the pending one)", n)
	}
	tb.age(t)
	if n, err := svc.Collect(ctx, time.Hour); err != nil || n != 2 {
		t.Fatalf("Collect = %d, %v; want 2 (alone, sharedA)", n, err)
	}
	for _, c := range []struct {
		f    files.File
		kept bool
	}{{alone, false}, {sharedA, false}, {sharedB, true}, {held, true}, {inDeleted, true}} {
		_, err := svc.Get(ctx, "local", c.f.ID)
		if kept := err == nil; kept != c.kept {
			t.Errorf("file %s kept = %v (%v), want %v", c.f.Filename, kept, err, c.kept)
		}
	}
	if !bytes.Equal(readAll(t, svc, sharedB, 0, -1), shared) {
		t.Error("the shared blob's bytes are gone while a file holds them")
	}
	// alone's 3 chunks and the crashed upload's went.
	if n := tb.count(t, `SELECT count(*) FROM convo.file_chunks`); n != 3 {
		t.Errorf("%d chunks, want 3 (shared, held, in deleted)", n)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_blobs`); n != 3 {
		t.Errorf("%d blobs, want 3", n)
	}

	// Deleting the conversation releases its message's file.
	if err := tb.store.DeleteConversation(ctx, "local", r2.conversationID); err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Collect(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("Collect after the delete = %d, %v; want 1", n, err)
	}
	if _, err := svc.Get(ctx, "local", inDeleted.ID); !errors.Is(err, files.ErrNotFound) {
		t.Errorf("the deleted conversation's file: %v, want gone", err)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_chunks`); n != 2 {
		t.Errorf("%d chunks, want 2 (shared, held)", n)
	}
}

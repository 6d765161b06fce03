// Package blobstest is the conformance suite of files' blob stores: Run
// checks the behaviour the Blobs interface promises, against a real store,
// so that every store (PostgreSQL, S3) behaves alike for the Service.
package blobstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/files"
)

// Run runs the suite as subtests of t; newBlobs returns the store under
// test (a fresh one per subtest, or a shared one: blob ids are new UUIDs).
//
// What it asserts, beyond the interface's comments:
//   - n < 0 reads from off to the end, nothing when off is at or past it;
//   - a range of n > 0 bytes the blob does not hold entirely reads what
//     there is, then fails with io.ErrUnexpectedEOF (errors.Is): a caller
//     that promised n bytes (Content-Length) must not send fewer quietly;
//   - Put returns r's error (errors.Is) when r fails, or ctx's when it
//     ends, and leaves nothing: Get says ErrNotFound;
//   - 20 concurrent Puts of 50 MB raise the Go heap by less than 64 MB,
//     unless memoryCheckedBy names the test that checks it another way
//     (a store whose uploads the process measures as a whole: one such
//     measurement of a gigabyte per store is enough).
//
// Run it from a test that is not parallel: the memory check measures the
// process's heap, which the package's other tests would move.
func Run(t *testing.T, newBlobs func(t *testing.T) files.Blobs, memoryCheckedBy string) {
	t.Run("RoundTrip", func(t *testing.T) { t.Parallel(); testRoundTrip(t, newBlobs(t)) })
	t.Run("Ranges", func(t *testing.T) { t.Parallel(); testRanges(t, newBlobs(t)) })
	t.Run("Large", func(t *testing.T) { t.Parallel(); testLarge(t, newBlobs(t)) })
	t.Run("FailingReader", func(t *testing.T) { t.Parallel(); testFailingReader(t, newBlobs(t)) })
	t.Run("CancelledPut", func(t *testing.T) { t.Parallel(); testCancelledPut(t, newBlobs(t)) })
	t.Run("Missing", func(t *testing.T) { t.Parallel(); testMissing(t, newBlobs(t)) })
	t.Run("Delete", func(t *testing.T) { t.Parallel(); testDelete(t, newBlobs(t)) })
	t.Run("ConcurrentPuts", func(t *testing.T) { t.Parallel(); testConcurrentPuts(t, newBlobs(t)) })
	// Not parallel, so it runs alone, before the parallel subtests resume
	// (they wait for Run to return): it measures the heap, which they
	// would move.
	t.Run("Memory", func(t *testing.T) {
		if memoryCheckedBy != "" {
			t.Skip("checked by " + memoryCheckedBy)
		}
		testMemory(t, newBlobs(t))
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	src := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	src.Read(b)
	return b
}

// put stores b as a new blob and checks the count Put returns.
func put(t *testing.T, blobs files.Blobs, b []byte) uuid.UUID {
	t.Helper()
	id := uuid.New()
	n, err := blobs.Put(ctx(t), id, bytes.NewReader(b))
	if err != nil {
		t.Fatalf("Put %d bytes: %v", len(b), err)
	}
	if n != int64(len(b)) {
		t.Fatalf("Put %d bytes returned %d", len(b), n)
	}
	return id
}

// get reads [off, off+n) of id.
func get(t *testing.T, blobs files.Blobs, id uuid.UUID, off, n int64) []byte {
	t.Helper()
	rc, err := blobs.Get(ctx(t), id, off, n)
	if err != nil {
		t.Fatalf("Get(%d, %d): %v", off, n, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%d, %d): read: %v", off, n, err)
	}
	return b
}

func testRoundTrip(t *testing.T, blobs files.Blobs) {
	for _, size := range []int{1, 1000, 256<<10 + 17} {
		want := randomBytes(uint64(size), size)
		id := put(t, blobs, want)
		if got := get(t, blobs, id, 0, -1); !bytes.Equal(got, want) {
			t.Errorf("%d bytes: Get returned %d bytes, not the ones put", size, len(got))
		}
	}
}

func testRanges(t *testing.T, blobs files.Blobs) {
	// Over two 256 KiB chunks (PostgreSQL's chunk size) and a bit.
	const size = 2*256<<10 + 1234
	b := randomBytes(7, size)
	id := put(t, blobs, b)
	for _, c := range []struct {
		name   string
		off, n int64
		want   []byte
	}{
		{"start", 0, 100, b[:100]},
		{"one byte", 5, 1, b[5:6]},
		{"middle across a chunk boundary", 256<<10 - 50, 100, b[256<<10-50 : 256<<10+50]},
		{"a whole chunk", 256 << 10, 256 << 10, b[256<<10 : 512<<10]},
		{"suffix to the end", size - 300, -1, b[size-300:]},
		{"all from 0", 0, -1, b},
		{"exactly to the end", size - 10, 10, b[size-10:]},
		{"to the end from the end", size, -1, nil},
		{"to the end from past the end", size + 100, -1, nil},
		{"empty range", 10, 0, nil},
	} {
		got := get(t, blobs, id, c.off, c.n)
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: Get(%d, %d) returned %d bytes, want %d (the blob's [%d, %d))",
				c.name, c.off, c.n, len(got), len(c.want), c.off, c.off+int64(len(c.want)))
		}
	}
	// Ranges past the end: what there is, then io.ErrUnexpectedEOF.
	for _, c := range []struct {
		name   string
		off, n int64
		want   []byte
	}{
		{"past the end", size - 10, 1000, b[size-10:]},
		{"from the end", size, 10, nil},
		{"from past the end", size + 100, 10, nil},
	} {
		rc, err := blobs.Get(ctx(t), id, c.off, c.n)
		if err != nil {
			t.Errorf("%s: Get(%d, %d): %v", c.name, c.off, c.n, err)
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: reading Get(%d, %d) of a %d-byte blob: %v, want io.ErrUnexpectedEOF", c.name, c.off, c.n, size, err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: Get(%d, %d) read %d bytes before failing, want the %d there are", c.name, c.off, c.n, len(got), len(c.want))
		}
	}
}

// genReader yields n pseudo-random bytes without holding them, hashing
// what it yields.
type genReader struct {
	src  *rand.ChaCha8
	left int64
	sum  hashWriter
}

type hashWriter interface {
	io.Writer
	Sum([]byte) []byte
}

func newGenReader(seed uint64, n int64) *genReader {
	return &genReader{src: rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1}), left: n, sum: sha256.New()}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	g.src.Read(p)
	g.sum.Write(p)
	g.left -= int64(len(p))
	return len(p), nil
}

func testLarge(t *testing.T, blobs files.Blobs) {
	const size = 20 << 20
	r := newGenReader(20, size)
	id := uuid.New()
	n, err := blobs.Put(ctx(t), id, r)
	if err != nil || n != size {
		t.Fatalf("Put 20 MiB: %d, %v", n, err)
	}
	rc, err := blobs.Get(ctx(t), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h := sha256.New()
	got, err := io.Copy(h, rc)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if got != size || !bytes.Equal(h.Sum(nil), r.sum.Sum(nil)) {
		t.Fatalf("read back %d bytes of another content than the %d put", got, size)
	}
}

// failingReader yields n bytes, then fails.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func testFailingReader(t *testing.T, blobs files.Blobs) {
	broken := errors.New("the client went away")
	for _, size := range []int64{0, 100, 3 << 20, 17 << 20} {
		id := uuid.New()
		_, err := blobs.Put(ctx(t), id, &failingReader{r: newGenReader(1, size), err: broken})
		if !errors.Is(err, broken) {
			t.Errorf("Put of a reader failing after %d bytes: %v, want the reader's error", size, err)
		}
		if _, err := blobs.Get(ctx(t), id, 0, -1); !errors.Is(err, files.ErrNotFound) {
			t.Errorf("Get after a Put failing after %d bytes: %v, want ErrNotFound", size, err)
		}
	}
}

func testCancelledPut(t *testing.T, blobs files.Blobs) {
	c, cancel := context.WithCancel(ctx(t))
	id := uuid.New()
	// The reader cancels the context after 1 MiB, as a client gone away.
	var read atomic.Int64
	r := readerFunc(func(p []byte) (int, error) {
		if read.Add(int64(len(p))) > 1<<20 {
			cancel()
		}
		return len(p), nil // endless
	})
	if _, err := blobs.Put(c, id, r); !errors.Is(err, context.Canceled) {
		t.Errorf("Put whose context is cancelled midway: %v, want context.Canceled", err)
	}
	if _, err := blobs.Get(ctx(t), id, 0, -1); !errors.Is(err, files.ErrNotFound) {
		t.Errorf("Get after a cancelled Put: %v, want ErrNotFound", err)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func testMissing(t *testing.T, blobs files.Blobs) {
	id := uuid.New()
	for _, r := range [][2]int64{{0, -1}, {0, 10}, {5, 0}} {
		if _, err := blobs.Get(ctx(t), id, r[0], r[1]); !errors.Is(err, files.ErrNotFound) {
			t.Errorf("Get(%d, %d) of a blob never put: %v, want ErrNotFound", r[0], r[1], err)
		}
	}
	if err := blobs.Delete(ctx(t), id); err != nil {
		t.Errorf("Delete of a blob never put: %v, want nil", err)
	}
}

func testDelete(t *testing.T, blobs files.Blobs) {
	keep := put(t, blobs, []byte("kept"))
	id := put(t, blobs, randomBytes(3, 300<<10))
	if err := blobs.Delete(ctx(t), id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := blobs.Get(ctx(t), id, 0, -1); !errors.Is(err, files.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := blobs.Delete(ctx(t), id); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
	if got := get(t, blobs, keep, 0, -1); string(got) != "kept" {
		t.Errorf("another blob after Delete: %q, want %q", got, "kept")
	}
}

func testConcurrentPuts(t *testing.T, blobs files.Blobs) {
	const n = 8
	ids := make([]uuid.UUID, n)
	want := make([][]byte, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		ids[i] = uuid.New()
		want[i] = randomBytes(uint64(100+i), 100<<10+i*4099)
		wg.Go(func() {
			got, err := blobs.Put(ctx(t), ids[i], bytes.NewReader(want[i]))
			if err == nil && got != int64(len(want[i])) {
				err = fmt.Errorf("Put returned %d, want %d", got, len(want[i]))
			}
			if err != nil {
				errs <- fmt.Errorf("blob %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		if got := get(t, blobs, ids[i], 0, -1); !bytes.Equal(got, want[i]) {
			t.Errorf("blob %d: read back %d bytes, not the %d put", i, len(got), len(want[i]))
		}
	}
}

// testMemory puts 20 blobs of 50 MB at once and samples the heap while they
// go: the peak must stay less than 64 MB above where it started.
func testMemory(t *testing.T, blobs files.Blobs) {
	const puts, size, bound = 20, 50_000_000, 64 << 20
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, puts)
	ids := make([]uuid.UUID, puts)
	for i := range puts {
		ids[i] = uuid.New()
		wg.Go(func() {
			n, err := blobs.Put(ctx(t), ids[i], newGenReader(uint64(1000+i), size))
			if err == nil && n != size {
				err = fmt.Errorf("Put returned %d, want %d", n, size)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	grew := int64(peak.Load()) - int64(base)
	t.Logf("%d concurrent Puts of %d bytes: heap peak %.1f MB above the start", puts, size, float64(grew)/1e6)
	if grew >= bound {
		t.Errorf("%d concurrent Puts of %d bytes raised the heap by %d bytes, want < %d", puts, size, grew, bound)
	}
	for _, id := range ids {
		if err := blobs.Delete(ctx(t), id); err != nil {
			t.Errorf("Delete: %v", err)
		}
	}
}

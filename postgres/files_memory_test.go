package postgres_test

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convo-dev/convo/files"
)

// generated is a reader of n bytes that no other seed repeats, made as
// they are read: it holds nothing.
type generated struct {
	rng  *rand.PCG
	left int64
}

func newGenerated(n int64, seed uint64) *generated {
	return &generated{rng: rand.NewPCG(seed, 0x9e3779b97f4a7c15), left: n}
}

func (g *generated) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.left)]
	n := 0
	for ; n+8 <= len(p); n += 8 {
		binary.LittleEndian.PutUint64(p[n:], g.rng.Uint64())
	}
	for ; n < len(p); n++ {
		p[n] = byte(g.rng.Uint64())
	}
	g.left -= int64(len(p))
	return len(p), nil
}

// TestFileUploadsHoldNoFile uploads 20 files of 50 MB at once from
// readers that make their bytes as they are read, sampling the heap all
// along: it must grow by less than 64 MB, so no upload holds its file (20
// would be 1 GB), only its chunk.
func TestFileUploadsHoldNoFile(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads 1 GB")
	}
	// Not parallel: it measures the process's heap, which the package's
	// other tests would move.
	const uploads, size, bound = 20, 50 << 20, 64 << 20
	svc, tb := fileService(t, files.Limits{MaxFileBytes: size, MaxUserBytes: 2 << 30})
	ctx := context.Background()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, uploads)
	for i := range uploads {
		wg.Go(func() {
			f, err := svc.Upload(ctx, "alice", "big.bin", "", newGenerated(size, uint64(i)+1))
			if err == nil && f.Size != size {
				t.Errorf("upload %d: size %d", i, f.Size)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("heap in use grew by %.1f MB at most, uploading %d × %d MB at once", float64(growth)/1e6, uploads, size>>20)
	if growth >= bound {
		t.Errorf("the heap grew by %d bytes, want under %d", growth, bound)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.file_blobs WHERE sha256 IS NOT NULL`); n != uploads {
		t.Errorf("%d blobs, want %d", n, uploads)
	}
}

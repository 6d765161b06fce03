package postgres_test

import (
	"context"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/postgres"
)

// benchFileBytes is the size of the file each benchmark moves.
const benchFileBytes = 16 << 20

// BenchmarkUploadPostgres uploads a 16 MiB file of new bytes per
// iteration through files.Service into the PostgreSQL store: MB/s is the
// upload's throughput (hashing, sniffing, one chunk per statement).
func BenchmarkUploadPostgres(b *testing.B) {
	svc, _ := fileService(b, files.Limits{MaxUserBytes: 1 << 40})
	ctx := context.Background()
	b.SetBytes(benchFileBytes)
	seed := uint64(0)
	for b.Loop() {
		seed++
		if _, err := svc.Upload(ctx, "alice", "bench.bin", "", newGenerated(benchFileBytes, seed)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDownloadPostgres reads a 16 MiB file back per iteration.
func BenchmarkDownloadPostgres(b *testing.B) {
	svc, _ := fileService(b, files.Limits{})
	ctx := context.Background()
	f, err := svc.Upload(ctx, "alice", "bench.bin", "", newGenerated(benchFileBytes, 1))
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 32<<10)
	b.SetBytes(benchFileBytes)
	for b.Loop() {
		rc, err := svc.Open(ctx, f, 0, -1)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, rc, buf)
		rc.Close()
		if err != nil || n != benchFileBytes {
			b.Fatalf("read %d bytes, %v", n, err)
		}
	}
}

// BenchmarkUploadCopyBaseline is the baseline of BenchmarkUploadPostgres:
// the same bytes, in chunks of the same size, sent with COPY into a bytea
// table in one statement: as fast as PostgreSQL takes them.
func BenchmarkUploadCopyBaseline(b *testing.B) {
	tb := setup(b)
	ctx := context.Background()
	if _, err := tb.pool.Exec(ctx, `CREATE TABLE copy_baseline (seq int, data bytea)`); err != nil {
		b.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `ALTER TABLE copy_baseline ALTER COLUMN data SET STORAGE EXTERNAL`); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchFileBytes)
	seed := uint64(0)
	buf := make([]byte, postgres.FileChunkBytes)
	for b.Loop() {
		seed++
		g := newGenerated(benchFileBytes, seed)
		seq := 0
		src := pgx.CopyFromFunc(func() ([]any, error) {
			n, err := io.ReadFull(g, buf)
			if n == 0 {
				return nil, nil
			}
			if err != nil && err != io.ErrUnexpectedEOF {
				return nil, err
			}
			seq++
			return []any{seq, buf[:n]}, nil
		})
		if _, err := tb.pool.CopyFrom(ctx, pgx.Identifier{"copy_baseline"}, []string{"seq", "data"}, src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDownloadCopyBaseline reads the 16 MiB back from the bytea
// table in one query: the baseline of BenchmarkDownloadPostgres.
func BenchmarkDownloadCopyBaseline(b *testing.B) {
	tb := setup(b)
	ctx := context.Background()
	if _, err := tb.pool.Exec(ctx, `CREATE TABLE copy_baseline (seq int, data bytea)`); err != nil {
		b.Fatal(err)
	}
	g := newGenerated(benchFileBytes, 1)
	buf := make([]byte, postgres.FileChunkBytes)
	for seq := 0; ; seq++ {
		n, _ := io.ReadFull(g, buf)
		if n == 0 {
			break
		}
		if _, err := tb.pool.Exec(ctx, `INSERT INTO copy_baseline VALUES ($1, $2)`, seq, buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(benchFileBytes)
	for b.Loop() {
		rows, err := tb.pool.Query(ctx, `SELECT data FROM copy_baseline ORDER BY seq`)
		if err != nil {
			b.Fatal(err)
		}
		total := 0
		for rows.Next() {
			total += len(rows.RawValues()[0])
		}
		if rows.Err() != nil || total != benchFileBytes {
			b.Fatalf("read %d bytes, %v", total, rows.Err())
		}
	}
}

package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/convo-dev/convo/files"
)

// proseWords are the words benchText writes.
var proseWords = strings.Fields(`the a of and to in is was for on with as by at from sourdough starter flour
water salt bake loaf crust crumb oven steam proof knead dough rise ferment yeast wild culture jar feed hour
night morning temperature warm cold kitchen recipe gram percent hydration shape score tin stone wheat rye
spelt whole grain butter honey seed oat bread baker window pan rack cool slice toast`)

// benchText returns n bytes of prose-like text, different for each seed:
// a word list, with a seeded number every few words so that the file has
// many distinct words, as a real document does.
func benchText(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(proseWords[r.IntN(len(proseWords))])
		if r.IntN(8) == 0 {
			fmt.Fprintf(&b, " %d", r.IntN(1_000_000))
		}
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

// BenchmarkUploadText uploads a 1 MiB text file (new bytes each time)
// per iteration through files.Service into the PostgreSQL store: the
// upload's cost with its text indexed for search (the tsvector of the
// whole MiB). BenchmarkUploadTextAsBinary is the same upload of the same
// size not indexed: the difference is what indexing costs.
func BenchmarkUploadText(b *testing.B) {
	benchUpload(b, "notes.txt", "text/plain; charset=utf-8")
}

// BenchmarkUploadTextAsBinary is BenchmarkUploadText's baseline: the same
// bytes after a NUL, which makes them application/octet-stream, not
// indexed.
func BenchmarkUploadTextAsBinary(b *testing.B) {
	benchUpload(b, "notes.bin", "application/octet-stream")
}

func benchUpload(b *testing.B, name, mediaType string) {
	svc, tb := fileService(b, files.Limits{MaxUserBytes: 1 << 40})
	ctx := context.Background()
	b.SetBytes(files.MaxTextBytes)
	seed := uint64(0)
	for b.Loop() {
		b.StopTimer()
		seed++
		data := benchText(files.MaxTextBytes, seed)
		if !strings.HasPrefix(mediaType, "text/") {
			data[0] = 0
		}
		b.StartTimer()
		f, err := svc.Upload(ctx, "alice", name, "", bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		if f.MediaType != mediaType {
			b.Fatalf("media type %q, want %q", f.MediaType, mediaType)
		}
	}
	b.StopTimer()
	if indexed := tb.count(b, `SELECT count(*) FROM convo.file_texts`); strings.HasPrefix(mediaType, "text/") != (indexed > 0) {
		b.Fatalf("%d files indexed uploading %s", indexed, mediaType)
	}
}

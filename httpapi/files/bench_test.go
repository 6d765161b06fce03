package files_test

import (
	"io"
	"mime/multipart"
	"net/http"
	"testing"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

const benchFileBytes = 8 << 20

// BenchmarkUpload measures POST /v1/files of an 8 MiB file, streamed by
// the client: throughput, and the bytes allocated (client and server in
// this process), which stay well under the file's size.
func BenchmarkUpload(b *testing.B) {
	tb := apitest.Setup(b, apitest.Options{Files: true, FileLimits: files.Limits{MaxUserBytes: 1 << 40, MaxFileBytes: benchFileBytes}})
	data := make([]byte, benchFileBytes)
	b.SetBytes(benchFileBytes)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		data[100] = byte(i) // other bytes each time: no dedupe
		data[101] = byte(i >> 8)
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			part, err := mw.CreateFormFile("file", "bench.bin")
			if err == nil {
				_, err = part.Write(data)
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		resp, err := http.Post(tb.URL+"/v1/files", mw.FormDataContentType(), pr)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("upload: %s", resp.Status)
		}
	}
}

// BenchmarkDownload measures GET /v1/files/{id}/content of an 8 MiB
// file kept in PostgreSQL.
func BenchmarkDownload(b *testing.B) {
	tb := apitest.Setup(b, apitest.Options{Files: true, FileLimits: files.Limits{MaxFileBytes: benchFileBytes}})
	data := make([]byte, benchFileBytes)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, _ := mw.CreateFormFile("file", "bench.bin")
		part.Write(data)
		mw.Close()
		pw.Close()
	}()
	resp, err := http.Post(tb.URL+"/v1/files", mw.FormDataContentType(), pr)
	if err != nil {
		b.Fatal(err)
	}
	loc := resp.Header.Get("Location")
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("upload: %s", resp.Status)
	}
	b.SetBytes(benchFileBytes)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Get(tb.URL + loc + "/content")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != benchFileBytes {
			b.Fatalf("read %d bytes", n)
		}
	}
}

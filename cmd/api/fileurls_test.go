package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/convo-dev/convo/internal/pgtest"
)

// TestFileURLsAcrossServers checks the production wiring of the file
// routes and their signed URLs: without CONVO_FILE_URL_KEY every server on
// a database signs with the key the first one kept there, so a URL one
// server gave is valid at another; a server with its own key refuses it.
func TestFileURLsAcrossServers(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a := startMain(t, map[string]string{"DATABASE_URL": dsn, "CONVO_WORKERS": "0"})
	b := startMain(t, map[string]string{"DATABASE_URL": dsn, "CONVO_WORKERS": "0"})
	own := startMain(t, map[string]string{"DATABASE_URL": dsn, "CONVO_WORKERS": "0",
		"CONVO_FILE_URL_KEY": strings.Repeat("ab", 32)})

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, _ := mw.CreateFormFile("file", "notes.txt")
	part.Write([]byte("hello, files\n"))
	mw.Close()
	resp, err := http.Post(a.URL()+"/v1/files", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ ID, MediaType, URL string }
	err = json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil || !strings.HasPrefix(f.MediaType, "text/plain") {
		t.Fatalf("upload: %s %+v %v", resp.Status, f, err)
	}
	for name, m := range map[string]*Main{"the same server": a, "another server": b} {
		resp, err := http.Get(m.URL() + f.URL)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != "hello, files\n" {
			t.Errorf("the signed URL at %s: %s %q", name, resp.Status, got)
		}
	}
	resp, err = http.Get(own.URL() + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(got), "sig: does not match") {
		t.Errorf("the signed URL at a server with its own key: %s %s", resp.Status, got)
	}
}

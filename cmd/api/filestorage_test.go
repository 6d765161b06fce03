package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/s3test"
	"github.com/convo-dev/convo/internal/testwait"
)

// TestFileStorageSettings: CONVO_FILE_STORAGE=s3 needs its bucket's
// settings, each error naming the one missing; postgres (the default)
// needs none.
func TestFileStorageSettings(t *testing.T) {
	t.Parallel()
	s3 := map[string]string{
		"CONVO_FILE_STORAGE": "s3", "CONVO_S3_ENDPOINT": "127.0.0.1:1", "CONVO_S3_BUCKET": "b",
		"CONVO_S3_ACCESS_KEY": "k", "CONVO_S3_SECRET_KEY": "s",
	}
	without := func(name string) map[string]string {
		env := map[string]string{}
		for k, v := range s3 {
			if k != name {
				env[k] = v
			}
		}
		return env
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"CONVO_FILE_STORAGE": "disk"}, "CONVO_FILE_STORAGE=disk: want postgres or s3"},
		{[]string{"--file-storage", "S3"}, nil, "--file-storage S3: want postgres or s3"},
		{nil, without("CONVO_S3_ENDPOINT"), "CONVO_S3_ENDPOINT (--s3-endpoint): required with CONVO_FILE_STORAGE=s3"},
		{nil, without("CONVO_S3_BUCKET"), "CONVO_S3_BUCKET (--s3-bucket): required with CONVO_FILE_STORAGE=s3"},
		{nil, without("CONVO_S3_ACCESS_KEY"), "CONVO_S3_ACCESS_KEY (--s3-access-key): required with CONVO_FILE_STORAGE=s3"},
		{nil, without("CONVO_S3_SECRET_KEY"), "CONVO_S3_SECRET_KEY: required with CONVO_FILE_STORAGE=s3"},
		{[]string{"--file-storage", "s3"}, without("CONVO_FILE_STORAGE"), ""},
		{nil, map[string]string{"CONVO_S3_INSECURE": "yes please"}, `CONVO_S3_INSECURE: "yes please" is not true or false`},
		{nil, map[string]string{"CONVO_S3_BUCKET": "ignored without s3"}, ""},
	} {
		m := NewMain()
		err := m.ParseFlags(c.args, func(k string) string { return c.env[k] })
		if got := errString(err); got != c.want {
			t.Errorf("%v %v: err = %q, want %q", c.args, c.env, got, c.want)
		}
	}
	m := NewMain()
	if err := m.ParseFlags([]string{"--s3-insecure", "--s3-prefix", "convo/"}, func(k string) string { return s3[k] }); err != nil {
		t.Fatal(err)
	}
	got := m.Config.FileStorage
	if got.Kind != "s3" || got.S3.Endpoint != "127.0.0.1:1" || got.S3.Bucket != "b" || got.S3.AccessKey != "k" ||
		got.S3.SecretKey != "s" || !got.S3.Insecure || got.S3.Prefix != "convo/" {
		t.Errorf("FileStorage = %+v", got)
	}
	if NewMain().Config.FileStorage.Kind != "postgres" {
		t.Errorf("default file storage %q, want postgres", NewMain().Config.FileStorage.Kind)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestFileStorageS3Start: with CONVO_FILE_STORAGE=s3 the server checks
// its bucket before it starts anything, and refuses to start, naming the
// bucket, when it does not exist; an existing bucket gets the blobs.
func TestFileStorageS3Start(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	env := map[string]string{
		"CONVO_FILE_STORAGE": "s3", "CONVO_S3_ENDPOINT": b.Endpoint, "CONVO_S3_BUCKET": "convo-missing",
		"CONVO_S3_ACCESS_KEY": b.AccessKey, "CONVO_S3_SECRET_KEY": b.SecretKey, "CONVO_S3_INSECURE": "true",
		"CONVO_S3_REGION": b.Region,
	}
	m := NewMain()
	m.Stdout = io.Discard
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	// No database is given: a start that went past the bucket check
	// would start a private PostgreSQL.
	err := m.Run(t.Context())
	m.Close()
	if err == nil || !strings.Contains(err.Error(), `S3 bucket "convo-missing" does not exist`) {
		t.Fatalf("Run with a missing bucket: %v, want an error naming it", err)
	}
	if m.cluster != nil {
		t.Error("a private PostgreSQL was started before the bucket was checked")
	}

	env["CONVO_S3_BUCKET"] = b.Name
	m = NewMain()
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	blobs, err := m.Config.FileStorage.s3Blobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	if _, err := blobs.Put(t.Context(), id, strings.NewReader("bytes")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client.StatObject(t.Context(), b.Name, "blobs/"+id.String(), minio.StatObjectOptions{}); err != nil {
		t.Errorf("the blob is not in bucket %s: %v", b.Name, err)
	}
}

// TestS3FilesReachWorkers: with CONVO_FILE_STORAGE=s3 the server's own
// workers read a message's file from the bucket, so the demo model's
// reply names the uploaded text file's first line.
func TestS3FilesReachWorkers(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	m := startMain(t, map[string]string{
		"CONVO_FILE_STORAGE": "s3", "CONVO_S3_ENDPOINT": b.Endpoint, "CONVO_S3_BUCKET": b.Name,
		"CONVO_S3_ACCESS_KEY": b.AccessKey, "CONVO_S3_SECRET_KEY": b.SecretKey, "CONVO_S3_INSECURE": "true",
		"CONVO_S3_REGION": b.Region, "CONVO_DEMO_TOKENS_PER_SECOND": "2000",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, _ := mw.CreateFormFile("file", "notes.txt")
	part.Write([]byte("Hello from the bucket\nsecond line\n"))
	mw.Close()
	resp, err := http.Post(m.URL()+"/v1/files", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil {
		t.Fatalf("upload: %s %v", resp.Status, err)
	}
	if objects := b.Client.ListObjects(ctx, b.Name, minio.ListObjectsOptions{Recursive: true}); len(collect(objects)) != 1 {
		t.Fatal("the upload is not in the bucket")
	}

	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "What is in it?", FileIds: []string{f.ID}}))
	if err != nil {
		t.Fatal(err)
	}
	var reply *convov1.Message
	testwait.Until(t, ctx, "the reply to end", func() bool {
		got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId}))
		if err != nil {
			t.Fatal(err)
		}
		reply = got.Msg.Messages[len(got.Msg.Messages)-1]
		return reply.Role == "assistant" && (reply.Status == "completed" || reply.Status == "failed" || reply.Status == "cancelled")
	})
	var text strings.Builder
	for _, blk := range reply.Blocks {
		text.WriteString(blk.Content)
	}
	if want := `its first line: "Hello from the bucket"`; reply.Status != "completed" || !strings.Contains(text.String(), want) {
		t.Errorf("reply %s, saying:\n%s\nwant it to say %q", reply.Status, text.String(), want)
	}
}

func collect[T any](ch <-chan T) []T {
	var out []T
	for v := range ch {
		out = append(out, v)
	}
	return out
}

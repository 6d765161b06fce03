package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/files/s3blobs"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/s3test"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/postgres"
)

// TestFileStorageSettings: CONVO_FILE_STORAGE is postgres (the default)
// or s3, which needs the bucket's settings, each error naming the one
// missing, as the API server's do.
func TestFileStorageSettings(t *testing.T) {
	t.Parallel()
	s3 := map[string]string{
		"DATABASE_URL": "postgres://x/db", "CONVO_FILE_STORAGE": "s3", "CONVO_S3_ENDPOINT": "127.0.0.1:1",
		"CONVO_S3_BUCKET": "b", "CONVO_S3_ACCESS_KEY": "k", "CONVO_S3_SECRET_KEY": "s",
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
		{nil, map[string]string{"DATABASE_URL": "postgres://x/db", "CONVO_FILE_STORAGE": "disk"}, `CONVO_FILE_STORAGE (--file-storage) "disk": want postgres or s3`},
		{nil, without("CONVO_S3_ENDPOINT"), "CONVO_S3_ENDPOINT (--s3-endpoint): required with CONVO_FILE_STORAGE=s3"},
		{nil, without("CONVO_S3_BUCKET"), "CONVO_S3_BUCKET (--s3-bucket): required with CONVO_FILE_STORAGE=s3"},
		{nil, without("CONVO_S3_ACCESS_KEY"), "CONVO_S3_ACCESS_KEY (--s3-access-key): required with CONVO_FILE_STORAGE=s3"},
		{nil, without("CONVO_S3_SECRET_KEY"), "CONVO_S3_SECRET_KEY: required with CONVO_FILE_STORAGE=s3"},
		{nil, map[string]string{"DATABASE_URL": "postgres://x/db", "CONVO_S3_INSECURE": "maybe"}, `CONVO_S3_INSECURE: "maybe" is not true or false`},
		{[]string{"--file-storage", "s3", "--s3-insecure", "--s3-prefix", "convo/"}, without("CONVO_FILE_STORAGE"), ""},
	} {
		m := NewMain()
		err := m.ParseFlags(c.args, func(k string) string { return c.env[k] })
		if got := errString(err); got != c.want {
			t.Errorf("%v %v: err = %q, want %q", c.args, c.env, got, c.want)
		}
		if c.want == "" && (m.Config.FileStorage != "s3" || m.Config.S3 != (s3blobs.Config{Endpoint: "127.0.0.1:1", Bucket: "b",
			AccessKey: "k", SecretKey: "s", Insecure: true, Prefix: "convo/"})) {
			t.Errorf("%v: storage %q, S3 %+v", c.args, m.Config.FileStorage, m.Config.S3)
		}
	}
	if got := NewMain().Config.FileStorage; got != "postgres" {
		t.Errorf("default file storage %q, want postgres", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestFilesInS3: with CONVO_FILE_STORAGE=s3 the command's workers read a
// message's file from the bucket: the demo model's reply names the text
// file's first line.
func TestFilesInS3(t *testing.T) {
	t.Parallel()
	b := s3test.Start(t)
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	cfg := s3blobs.Config{Endpoint: b.Endpoint, Bucket: b.Name, Region: b.Region, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Insecure: true}
	blobs, err := s3blobs.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	db, store := openStore(t, dsn)
	svc := files.NewService(files.Options{Store: postgres.NewFileStore(db), Blobs: blobs, Storage: files.StorageS3})
	f, err := svc.Upload(ctx, "local", "notes.txt", "", strings.NewReader("Hello from the bucket\nsecond line\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "local", Text: "What is in it?", FileIDs: []uuid.UUID{f.ID}, ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}

	m := NewMain()
	m.Config.FileStorage, m.Config.S3 = "s3", cfg
	run(t, m, "--database-url", dsn, "--demo-tokens-per-second", "-1")
	t.Cleanup(func() { m.Close() })
	var reply conversation.Message
	testwait.For(t, "the reply to end", func() bool {
		st, err := store.State(ctx, "local", res.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		reply = st.Messages[1]
		return reply.Status == conversation.MessageCompleted || reply.Status == conversation.MessageFailed
	})
	var text strings.Builder
	for _, blk := range reply.Blocks {
		text.WriteString(blk.Content)
	}
	if want := `its first line: "Hello from the bucket"`; reply.Status != conversation.MessageCompleted || !strings.Contains(text.String(), want) {
		t.Errorf("reply %s, saying:\n%s\nwant it to say %q", reply.Status, text.String(), want)
	}
}

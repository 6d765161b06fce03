package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/files/s3blobs"
	"github.com/convo-dev/convo/postgres"
)

// The places files' bytes may live (CONVO_FILE_STORAGE).
const (
	fileStoragePostgres = "postgres"
	fileStorageS3       = "s3"
)

// FileStorage says where files' bytes live: in PostgreSQL, the default, or
// in an S3-compatible bucket (docs/files.md, "Storing bytes in S3"). The
// files' metadata is in PostgreSQL either way.
type FileStorage struct {
	// Kind is postgres or s3 (CONVO_FILE_STORAGE, --file-storage).
	Kind string
	// S3 is the bucket with Kind s3: CONVO_S3_ENDPOINT, CONVO_S3_BUCKET,
	// CONVO_S3_REGION, CONVO_S3_ACCESS_KEY, CONVO_S3_SECRET_KEY,
	// CONVO_S3_INSECURE, CONVO_S3_PREFIX. The secret key has no flag:
	// a flag shows in the process list and in --help's defaults.
	// Uploads are spooled in TMPDIR.
	S3 s3blobs.Config
}

func (f *FileStorage) fromEnv(getenv func(string) string) error {
	if v := getenv("CONVO_FILE_STORAGE"); v != "" {
		f.Kind = v
	}
	return f.S3.FromEnv(getenv)
}

func (f *FileStorage) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Kind, "file-storage", f.Kind, "where files' bytes live: postgres or s3 (CONVO_FILE_STORAGE); s3 needs the --s3-* settings")
	f.S3.RegisterFlags(fs)
}

// check refuses a storage that cannot work, naming each setting as the
// user gave it (settingNames); a missing one by its variable.
func (f *FileStorage) check(names settingNames) error {
	switch f.Kind {
	case fileStoragePostgres:
		return nil
	case fileStorageS3:
	default:
		return fmt.Errorf("%s: want postgres or s3", names.name("file-storage"))
	}
	for _, s := range []struct{ flag, value string }{
		{"s3-endpoint", f.S3.Endpoint}, {"s3-bucket", f.S3.Bucket}, {"s3-access-key", f.S3.AccessKey},
	} {
		if s.value == "" {
			return fmt.Errorf("%s (--%s): required with %s", names.envName(s.flag), s.flag, names.name("file-storage"))
		}
	}
	if f.S3.SecretKey == "" {
		return fmt.Errorf("CONVO_S3_SECRET_KEY: required with %s", names.name("file-storage"))
	}
	return nil
}

// s3Blobs opens the bucket when files' bytes live in S3, checking that it
// exists and that the keys reach it; nil with PostgreSQL.
func (f *FileStorage) s3Blobs(ctx context.Context) (*s3blobs.Store, error) {
	if f.Kind != fileStorageS3 {
		return nil, nil
	}
	store, err := s3blobs.New(ctx, f.S3)
	if err != nil {
		return nil, fmt.Errorf("CONVO_FILE_STORAGE=s3: %w", err)
	}
	return store, nil
}

// fileBlobs returns where this server keeps files' bytes, and the name
// of that storage in the files' metadata (files.Options.Storage): the
// bucket with CONVO_FILE_STORAGE=s3 (opened by Run), else PostgreSQL.
func (m *Main) fileBlobs() (files.Blobs, string) {
	if m.s3Blobs != nil {
		return m.s3Blobs, files.StorageS3
	}
	return postgres.NewFileBlobs(m.pool), files.StoragePostgres
}

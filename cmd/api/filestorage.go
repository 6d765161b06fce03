package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

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
	for name, dst := range map[string]*string{
		"CONVO_FILE_STORAGE": &f.Kind, "CONVO_S3_ENDPOINT": &f.S3.Endpoint, "CONVO_S3_BUCKET": &f.S3.Bucket,
		"CONVO_S3_REGION": &f.S3.Region, "CONVO_S3_ACCESS_KEY": &f.S3.AccessKey, "CONVO_S3_SECRET_KEY": &f.S3.SecretKey,
		"CONVO_S3_PREFIX": &f.S3.Prefix,
	} {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	if v := getenv("CONVO_S3_INSECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("CONVO_S3_INSECURE: %q is not true or false", v)
		}
		f.S3.Insecure = b
	}
	return nil
}

func (f *FileStorage) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Kind, "file-storage", f.Kind, "where files' bytes live: postgres or s3 (CONVO_FILE_STORAGE); s3 needs the --s3-* settings")
	fs.StringVar(&f.S3.Endpoint, "s3-endpoint", f.S3.Endpoint, "the S3 API's host[:port], e.g. s3.eu-west-1.amazonaws.com (CONVO_S3_ENDPOINT)")
	fs.StringVar(&f.S3.Bucket, "s3-bucket", f.S3.Bucket, "the bucket of files' bytes; it must exist (CONVO_S3_BUCKET)")
	fs.StringVar(&f.S3.Region, "s3-region", f.S3.Region, "the bucket's region (CONVO_S3_REGION); empty: asked of the server")
	fs.StringVar(&f.S3.AccessKey, "s3-access-key", f.S3.AccessKey, "the S3 access key id (CONVO_S3_ACCESS_KEY); its secret is CONVO_S3_SECRET_KEY, which has no flag")
	fs.BoolVar(&f.S3.Insecure, "s3-insecure", f.S3.Insecure, "speak plain HTTP to the S3 endpoint, not HTTPS (CONVO_S3_INSECURE)")
	fs.StringVar(&f.S3.Prefix, "s3-prefix", f.S3.Prefix, "put before every object key, e.g. convo/ (CONVO_S3_PREFIX); objects are <prefix>blobs/<id>")
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

// Package s3test runs a real S3 server for tests: VersityGW's versitygw
// with its posix backend (`versitygw posix`, objects stored as files),
// built from the Go module proxy by package gwbin, on a free port of
// 127.0.0.1, its data in a temporary directory. Each test gets its own
// bucket from Start.
//
// A package whose tests use it should have
//
//	func TestMain(m *testing.M) { s3test.Main(m) }
//
// so that its tests share one server (started by the first Start, stopped
// when the tests end). Without it, each Start starts a server of its own,
// stopped when the test ends. A missing versitygw is built first (minutes,
// once per machine; scripts/test.sh builds it in the background): the
// tests never skip for want of it.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"
)

// Bucket is a test's own bucket on a running S3 server, and what a client
// needs to reach it.
type Bucket struct {
	Endpoint  string // host:port, plain HTTP
	Region    string
	AccessKey string
	SecretKey string
	Name      string
	// Client is a minio-go client of the server with these credentials.
	Client *minio.Client
	// Server is the server holding the bucket.
	Server *Server
}

var shared struct {
	enabled bool // Main runs the tests
	once    sync.Once
	srv     *Server
	dir     string
	err     error
}

// Start returns a new empty bucket on the package's server (see Main), or
// on a server of the test's own in t.TempDir() when the package has no
// TestMain calling Main. It fails the test when versitygw cannot be built
// or does not start.
func Start(t testing.TB) Bucket {
	t.Helper()
	// No bound here: a cold build of versitygw takes minutes (go test's
	// -timeout bounds it); the server's start is bounded by StartServer.
	ctx := context.Background()
	var srv *Server
	if shared.enabled {
		shared.once.Do(func() {
			shared.dir, shared.err = os.MkdirTemp("", "convo-s3test-*")
			if shared.err == nil {
				shared.srv, shared.err = StartServer(ctx, shared.dir, os.Stderr)
			}
		})
		if shared.err != nil {
			t.Fatalf("s3test: %v", shared.err)
		}
		srv = shared.srv
	} else {
		var err error
		if srv, err = StartServer(ctx, t.TempDir(), os.Stderr); err != nil {
			t.Fatalf("s3test: %v", err)
		}
		t.Cleanup(func() {
			if err := srv.Close(); err != nil {
				t.Logf("s3test: %v", err)
			}
		})
	}
	name, err := srv.NewBucket(ctx)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	return Bucket{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		Name: name, Client: srv.Client, Server: srv}
}

// Main runs the tests of m sharing one server, stops it and deletes its
// data, and exits with the tests' status. Call it from TestMain.
func Main(m *testing.M) {
	shared.enabled = true
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "s3test:", err)
		}
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// NewBucket creates a bucket of a new random name and returns the name.
func (s *Server) NewBucket(ctx context.Context) (string, error) {
	var b [6]byte
	rand.Read(b[:])
	name := "t-" + hex.EncodeToString(b[:])
	if err := s.Client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		return "", fmt.Errorf("create bucket %s: %w", name, err)
	}
	return name, nil
}

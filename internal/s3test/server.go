package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/convo-dev/convo/internal/s3test/gwbin"
)

// Server is a running `versitygw posix`: an S3 gateway on a free port of
// 127.0.0.1 whose buckets are directories of Dir/data and whose objects
// are files in them.
type Server struct {
	Endpoint  string // host:port
	Region    string
	AccessKey string
	SecretKey string
	Client    *minio.Client
	// Dir holds the server's data (data/) and its log (versitygw.log).
	Dir string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done
}

// StartServer starts versitygw (building it first when missing, the go
// command's output to buildLog) with its data in dir, waits until it
// answers S3 requests, and returns it. The port is picked free just before
// the start; a start that loses it to another process is retried on a new
// one. Errors carry the end of versitygw's log.
func StartServer(ctx context.Context, dir string, buildLog io.Writer) (*Server, error) {
	bin, err := gwbin.Ensure(ctx, buildLog)
	if err != nil {
		return nil, err
	}
	const attempts = 3
	for i := 1; ; i++ {
		s, err := startOnce(ctx, bin, dir)
		if err == nil || i == attempts || ctx.Err() != nil {
			return s, err
		}
	}
}

func startOnce(ctx context.Context, bin, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "127.0.0.1:" + strconv.Itoa(port), Region: "us-east-1",
		AccessKey: "convo-test", SecretKey: "convo-test-secret", Dir: dir, done: make(chan struct{})}
	logPath := filepath.Join(dir, "versitygw.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	// The root account's keys go in the environment, not on the command
	// line; with no IAM service configured it is the only account.
	s.cmd = exec.Command(bin, "--port", s.Endpoint, "--region", s.Region, "--quiet", "posix", data)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	s.cmd.Dir = dir
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	if s.Client, err = minio.New(s.Endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region,
	}); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("versitygw posix on %s: %w; the end of its log (%s):\n%s", s.Endpoint, err, logPath, logTail(logPath))
	}
	return s, nil
}

// waitReady waits until the gateway lists buckets with the test's keys:
// it serves as soon as its port is open.
func (s *Server) waitReady(ctx context.Context) error {
	const bound = 30 * time.Second
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var last error
	for {
		last = s.probe(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("versitygw exited: %v", s.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %w", bound, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.Client.ListBuckets(ctx)
	return err
}

// Close stops the server: SIGTERM, then SIGKILL when it has not exited
// within a few seconds (its data is thrown away, so a kill loses nothing).
// It returns an error only when the process could not be signalled.
func (s *Server) Close() error {
	if s.cmd.Process == nil {
		return nil
	}
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop versitygw: %w", err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(5 * time.Second):
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill versitygw: %w", err)
	}
	<-s.done
	return nil
}

// freePort returns a port of 127.0.0.1 free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	const max = 4000
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return string(bytes.TrimSpace(b))
}

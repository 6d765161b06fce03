package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/convo-dev/convo/internal/s3test/weedbin"
)

// Server is a running `weed server -s3`: master, volume server, filer and
// S3 gateway in one process, each on a free port of 127.0.0.1.
type Server struct {
	Endpoint  string // the S3 gateway, host:port
	Region    string
	AccessKey string
	SecretKey string
	Client    *minio.Client
	// Dir holds the server's data, its S3 identities (s3.json) and its
	// log (weed.log).
	Dir string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done
}

// StartServer starts weed (building it first when missing, the go
// command's output to buildLog) with its data in dir, waits until its S3
// gateway stores objects, and returns it. Ports are picked free just
// before the start; a start that loses one to another process is retried
// on new ones. Errors carry the end of weed's log.
func StartServer(ctx context.Context, dir string, buildLog io.Writer) (*Server, error) {
	bin, err := weedbin.Ensure(ctx, buildLog)
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
	ports, err := freePorts(8)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "127.0.0.1:" + strconv.Itoa(ports[6]), Region: "us-east-1",
		AccessKey: "convo-test", SecretKey: "convo-test-secret", Dir: dir, done: make(chan struct{})}
	config := filepath.Join(dir, "s3.json")
	if err := writeIdentities(config, s.AccessKey, s.SecretKey); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "weed.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	s.cmd = exec.Command(bin, "server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir="+data,
		"-master.port="+p(0), "-master.port.grpc="+p(1), "-master.telemetry=false",
		// Volumes of at most 1 GiB, sparse files: the tests write a few
		// GiB in all, in many buckets.
		"-master.volumeSizeLimitMB=1024", "-volume.max=200",
		"-volume.port="+p(2), "-volume.port.grpc="+p(3), "-volume.preStopSeconds=0",
		"-filer", "-filer.port="+p(4), "-filer.port.grpc="+p(5),
		"-s3", "-s3.port="+p(6), "-s3.port.grpc="+p(7), "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.config="+config,
	)
	s.cmd.Dir = dir
	// Each bucket is a collection of its own, for which the master grows
	// 7 volumes at once by default: a bucket per test would soon take
	// every slot ("no free volumes"). One at a time, as weed mini does.
	s.cmd.Env = append(os.Environ(), "WEED_MASTER_VOLUME_GROWTH_COPY_1=1")
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start weed: %w", err)
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
		return nil, fmt.Errorf("weed server -s3 on %s: %w; the end of its log (%s):\n%s", s.Endpoint, err, logPath, logTail(logPath))
	}
	return s, nil
}

// waitReady waits until the gateway creates a bucket and stores an object
// in it: a volume server must have joined the master for that, which takes
// a few seconds after the ports open.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	const bucket = "s3test-ready"
	var last error
	for {
		last = s.probe(ctx, bucket)
		if last == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("weed exited: %v", s.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after 2m: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) probe(ctx context.Context, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		if code := minio.ToErrorResponse(err).Code; code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
			return err
		}
	}
	_, err := s.Client.PutObject(ctx, bucket, "probe", strings.NewReader("ready"), 5, minio.PutObjectOptions{})
	return err
}

// Close stops the server. It is killed, not asked to stop: its data is
// thrown away, and weed takes more than 10 s to stop on SIGTERM.
func (s *Server) Close() error {
	if s.cmd.Process == nil {
		return nil
	}
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	return nil
}

// writeIdentities writes weed's S3 configuration: one identity, allowed
// everything, with the given keys.
func writeIdentities(path, accessKey, secretKey string) error {
	type cred struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type identity struct {
		Name        string   `json:"name"`
		Credentials []cred   `json:"credentials"`
		Actions     []string `json:"actions"`
	}
	b, err := json.MarshalIndent(map[string][]identity{"identities": {{
		Name: "convo-test", Credentials: []cred{{accessKey, secretKey}},
		Actions: []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// freePorts returns n distinct ports of 127.0.0.1 free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	const max = 4000
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return string(bytes.TrimSpace(b))
}

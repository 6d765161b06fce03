package guard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// bodyServer serves h behind BodyDeadline(limit) over HTTP/1.1 and
// unencrypted HTTP/2, as cmd/api does.
func bodyServer(t *testing.T, limit time.Duration, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(BodyDeadline(limit, h))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}

// slowReader yields one byte per interval, n bytes in all, until done.
type slowReader struct {
	n        int
	interval time.Duration
	done     <-chan struct{}
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	select {
	case <-time.After(r.interval):
	case <-r.done:
		return 0, io.ErrClosedPipe
	}
	r.n--
	p[0] = 'x'
	return 1, nil
}

func TestBodyDeadline(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond

	// readAll answers what reading the body gave: its size, or the error.
	readAll := func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var timeout *BodyTimeoutError
		switch {
		case errors.As(err, &timeout) && errors.Is(err, os.ErrDeadlineExceeded):
			w.WriteHeader(http.StatusRequestTimeout)
			fmt.Fprint(w, err)
		case err != nil:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "unexpected error: %v", err)
		default:
			fmt.Fprintf(w, "read %d bytes", len(b))
		}
	}

	t.Run("SlowBodyIsCutOffHTTP1", func(t *testing.T) {
		t.Parallel()
		srv := bodyServer(t, limit, readAll)
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n")
		// One byte per 100 ms, in the background, until the server is done.
		go func() {
			for range 1000 {
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within 300ms") {
			t.Fatalf("got %s %q; want the body's timeout", resp.Status, body)
		}
		// The server closes the connection: its body was never read whole.
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Error("connection still open after the cut-off")
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("cut off after %v", took)
		}
	})

	t.Run("SlowBodyIsCutOffHTTP2", func(t *testing.T) {
		t.Parallel()
		srv := bodyServer(t, limit, readAll)
		done := make(chan struct{})
		defer close(done)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, &slowReader{n: 1000, interval: 100 * time.Millisecond, done: done})
		req.ContentLength = 1000
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("got %s %s %q; want HTTP/2 and the body's timeout", resp.Proto, resp.Status, body)
		}
	})

	// A stream that goes on after its body was read outlives the body's
	// deadline: over HTTP/1.1 a deadline left on the connection would
	// cancel the request's context in net/http's background read.
	stream := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc := http.NewResponseController(w)
		for i := range 10 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(limit / 3):
			}
			fmt.Fprintf(w, "line %d\n", i)
			_ = rc.Flush()
		}
		fmt.Fprintln(w, "end")
	}
	for name, client := range map[string]*http.Client{"HTTP1": http.DefaultClient, "HTTP2": h2cClient()} {
		t.Run("StreamOutlivesDeadline"+name, func(t *testing.T) {
			t.Parallel()
			srv := bodyServer(t, limit, stream)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"a":1}`))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			// 10 lines a third of the deadline apart: over three deadlines.
			if !strings.HasSuffix(string(got), "line 9\nend\n") {
				t.Fatalf("stream ended early: %q", got)
			}
		})
	}

	t.Run("BodiesInTimeAndNoBody", func(t *testing.T) {
		t.Parallel()
		srv := bodyServer(t, limit, readAll)
		for _, body := range []string{"", strings.Repeat("y", 100_000)} {
			resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("read %d bytes", len(body)); string(got) != want {
				t.Errorf("got %q; want %q", got, want)
			}
		}
	})
}

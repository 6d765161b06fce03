package guard

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// BodyTimeoutError is what a request body's Read returns once the time
// BodyDeadline allows it is up: the client sent its body too slowly. It
// matches os.ErrDeadlineExceeded (errors.Is).
type BodyTimeoutError struct {
	// Limit is the time the body had.
	Limit time.Duration
}

func (e *BodyTimeoutError) Error() string {
	return fmt.Sprintf("the request body did not arrive within %v", e.Limit)
}

// Unwrap makes the error an os.ErrDeadlineExceeded.
func (e *BodyTimeoutError) Unwrap() error { return os.ErrDeadlineExceeded }

// Timeout reports true, as a net.Error's Timeout does.
func (e *BodyTimeoutError) Timeout() bool { return true }

// BodyDeadline bounds how long a request's body may take to arrive: limit
// from the moment the handler starts (the headers have arrived by then,
// bounded by the server's ReadHeaderTimeout). A body still incomplete
// then fails to read with a *BodyTimeoutError; over HTTP/1.1 the
// connection is closed after the answer. A limit of 0 or less bounds
// nothing.
//
// Only the body is bounded, never the response: the deadline is lifted as
// soon as the body has been read to its end, so that a long-lived stream
// answering the request (StreamConversation, SSE, AG-UI, the AI SDK) goes
// on. (A read deadline left on an HTTP/1.1 connection would fire in
// net/http's background read and cancel the request's context; net/http
// clears it itself when that read starts, and the lift here makes the rule
// hold whatever the protocol. Over HTTP/2 the deadline is the stream's
// own.)
//
// A handler that answers without reading the body (a refused request)
// leaves the deadline in place: net/http then reads what is left of the
// body to reuse the connection, and the deadline bounds that read too.
// A request without a body is served as it is.
func BodyDeadline(limit time.Duration, next http.Handler) http.Handler {
	if limit <= 0 {
		return next
	}
	return BodyDeadlines(func(*http.Request) time.Duration { return limit }, next)
}

// BodyDeadlines is BodyDeadline with each request's limit from limitFor
// (an upload's longer than a JSON body's, say).
func BodyDeadlines(limitFor func(*http.Request) time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := limitFor(r)
		if limit <= 0 || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(limit)); err != nil {
			// A ResponseWriter without deadlines (a test's recorder):
			// nothing to bound, and nothing to lift.
			next.ServeHTTP(w, r)
			return
		}
		// A copy of the request carries the body: net/http looks at the
		// Body of the request it made, after the handler, to decide how
		// to finish it (discard what is left, or close).
		r = r.WithContext(r.Context())
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, limit: limit}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once the body has been read to its
// end, and names the error of a read cut off by it.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	limit time.Duration
	lift  sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.lift.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) })
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		err = &BodyTimeoutError{Limit: b.limit}
	}
	return n, err
}

package connectapi

import (
	"context"
	"net/http"
	"time"

	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// connect-go flushes the response after every message a stream sends, so
// each event would cost every subscriber one write to its connection (and,
// over HTTP/1.1, one chunk). StreamConversation instead writes every event
// that is ready, then flushes once: a subscriber that fell a few events
// behind catches up in one write. The flushes are the stream loop's to
// decide, through a coalescingWriter around the response.

// coalescingWriter is a response whose flushes can be held back: while
// held, Flush only notes that one is owed, and release makes it.
// It is used by the handler's goroutine only.
//
// It also bounds every write with a deadline, the snapshot's included: a
// client that does not read for writeTimeout is cut off (the write fails,
// the stream ends, and everything it held is released). The deadline is
// armed by the first write after an idle moment and cleared once the
// writes are flushed, before the stream waits for its next event: over
// HTTP/2 an armed deadline resets the stream when it passes, even idle.
type coalescingWriter struct {
	http.ResponseWriter
	flusher      http.Flusher
	rc           *http.ResponseController
	writeTimeout time.Duration
	armed        bool
	held         bool
	owed         bool
	// parkable: the stream may park (park.go); hijacked: it has, and the
	// response is no longer the handler's to write.
	parkable bool
	hijacked bool
}

// Write writes to the response, unless the stream parked: what connect
// writes after the handler returned (the end of the stream) is the parked
// stream's to write.
func (w *coalescingWriter) Write(b []byte) (int, error) {
	if w.hijacked {
		return len(b), nil
	}
	w.arm()
	return w.ResponseWriter.Write(b)
}

// arm sets the write deadline unless it is set.
func (w *coalescingWriter) arm() {
	if !w.armed {
		w.armed = true
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.writeTimeout))
	}
}

// disarm clears the write deadline if it is set.
func (w *coalescingWriter) disarm() {
	if w.armed {
		w.armed = false
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}

// WriteHeader is the response's, unless the stream parked.
func (w *coalescingWriter) WriteHeader(code int) {
	if !w.hijacked {
		w.ResponseWriter.WriteHeader(code)
	}
}

// Flush flushes now, or later when held.
func (w *coalescingWriter) Flush() {
	if w.hijacked {
		return
	}
	if w.held {
		w.owed = true
		return
	}
	w.owed = false
	w.arm()
	w.flusher.Flush()
	w.disarm()
}

// Unwrap gives http.ResponseController the underlying response.
func (w *coalescingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// hold holds back flushes until release; nil does nothing.
func (w *coalescingWriter) hold() {
	if w != nil {
		w.held = true
	}
}

// release makes the flush that hold held back, if any; nil does nothing.
func (w *coalescingWriter) release() {
	if w == nil {
		return
	}
	w.held = false
	if w.owed {
		w.Flush()
	}
	w.disarm()
}

// flushNow sends what was written, and the response's headers if nothing
// was written yet: a client learns that its stream is open before the first
// event, which a resumed stream may wait long for. nil does nothing.
func (w *coalescingWriter) flushNow() {
	if w == nil || w.hijacked {
		return
	}
	w.owed = false
	w.arm()
	w.flusher.Flush()
	w.disarm()
}

type coalescingKey struct{}

// coalescingFrom returns the stream's coalescingWriter, or nil when the
// handler was not reached through withCoalescing.
func coalescingFrom(ctx context.Context) *coalescingWriter {
	w, _ := ctx.Value(coalescingKey{}).(*coalescingWriter)
	return w
}

// withCoalescing gives StreamConversation calls a coalescingWriter (in
// their context), whose writes have writeTimeout as their deadline; other
// calls pass through untouched. With park, a call that may park is
// answered "Connection: close": a parked stream's connection is not
// reused.
func withCoalescing(h http.Handler, park bool, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok || r.URL.Path != convov1connect.ConversationServiceStreamConversationProcedure {
			h.ServeHTTP(w, r)
			return
		}
		cw := &coalescingWriter{ResponseWriter: w, flusher: f, rc: http.NewResponseController(w),
			writeTimeout: writeTimeout, parkable: park && parkable(r)}
		if cw.parkable {
			w.Header().Set("Connection", "close")
		}
		// Whatever deadline the connection had (a server may set one for
		// every response) is the stream's to set from here.
		cw.armed = true
		cw.disarm()
		h.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), coalescingKey{}, cw)))
		// The end of the stream, which net/http writes after the handler
		// returns, gets a deadline too.
		if !cw.hijacked {
			cw.arm()
		}
	})
}

package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/wire"
)

// SSEWriter writes Server-Sent Events. Events are buffered, not flushed
// one by one: Server.Next flushes what was written when the subscription
// has nothing more ready, so a subscriber that fell a few events behind
// (or a snapshot with its replayed blocks) catches up in one write to its
// connection, as StreamConversation does over Connect. A buffer past
// maxBuffered is flushed at once.
//
// Every flush has a deadline (WriteTimeout from its start): a client that
// does not read for that long is cut off, the write fails, and the
// handler returns, releasing what the stream held. The deadline is
// cleared once the write is flushed (over HTTP/2 an armed deadline resets
// the stream when it passes, even idle), and armed again by End, which
// flushes what is left, for what net/http writes after the handler
// returns.
type SSEWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	buf          bytes.Buffer
}

// maxBuffered bounds what an SSEWriter holds before it flushes: a long
// burst still goes out in pieces of this size.
const maxBuffered = 32 << 10

// StartSSE answers 200 with the headers an event stream needs (no caching,
// no proxy buffering) and the reconnection delay EventSource should use.
// Call End when the stream ends.
func (s *Server) StartSSE(w http.ResponseWriter) (*SSEWriter, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	out := &SSEWriter{w: w, rc: http.NewResponseController(w), writeTimeout: s.WriteTimeout}
	_ = out.rc.SetWriteDeadline(time.Now().Add(out.writeTimeout))
	w.WriteHeader(http.StatusOK)
	out.buf.WriteString("retry: ")
	out.buf.WriteString(strconv.FormatInt(s.Retry.Milliseconds(), 10))
	out.buf.WriteString("\n\n")
	return out, out.flush()
}

// Event writes one event: its id (none when empty), its name (none when
// empty: "message"), and data, one data line per line of it.
func (s *SSEWriter) Event(id, name string, data []byte) error {
	if id != "" {
		s.buf.WriteString("id: ")
		s.buf.WriteString(id)
		s.buf.WriteByte('\n')
	}
	if name != "" {
		s.buf.WriteString("event: ")
		s.buf.WriteString(name)
		s.buf.WriteByte('\n')
	}
	for line := range bytes.Lines(data) {
		s.buf.WriteString("data: ")
		s.buf.Write(bytes.TrimRight(line, "\r\n"))
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	if s.buf.Len() >= maxBuffered {
		return s.flush()
	}
	return nil
}

// JSONEvents writes each value as the JSON data of one unnamed SSE event,
// as AG-UI and the AI SDK's stream protocol have it.
func (s *SSEWriter) JSONEvents(values []any) error {
	for _, v := range values {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := s.Event("", "", data); err != nil {
			return err
		}
	}
	return nil
}

// KeepAlive writes and flushes a keep-alive comment, for a stream that
// waits for its events itself rather than through Server.Next.
func (s *SSEWriter) KeepAlive() error { return s.comment("keep-alive") }

// Flush writes what is buffered to the client now, for a stream that
// sends without Server.Next (which flushes when it has nothing ready).
func (s *SSEWriter) Flush() error { return s.flush() }

// ErrorEvent writes err as an SSE event named "error" whose data is the
// JSON error body WriteError answers with ({"code", "message"}): how a
// stream that has started tells why it ends. An error that is the
// server's has its detail left out (log it with StreamEnded).
func (s *Server) ErrorEvent(out *SSEWriter, err error) error {
	f := wire.Classify(err)
	st, ok := statuses[f.Code]
	if !ok {
		st = statuses[conversation.Internal]
	}
	data, jerr := json.Marshal(errorBody{Code: st.name, Message: f.Message})
	if jerr != nil {
		return jerr
	}
	return out.Event("", "error", data)
}

// comment writes a comment line, which every client ignores.
func (s *SSEWriter) comment(text string) error {
	s.buf.WriteString(": ")
	s.buf.WriteString(text)
	s.buf.WriteString("\n\n")
	return s.flush()
}

// flush writes what is buffered and flushes it to the client.
func (s *SSEWriter) flush() error {
	if s.buf.Len() == 0 {
		return nil
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err == nil {
		err = s.rc.Flush()
	}
	if err != nil {
		return err
	}
	return s.rc.SetWriteDeadline(time.Time{})
}

// End flushes what is buffered (the events a handler writes as its
// stream ends) and arms the write deadline for the end of the response,
// which net/http writes after the handler returns.
func (s *SSEWriter) End() {
	_ = s.flush()
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
}

// Next returns the subscription's next event. When none is ready it
// first flushes what out holds, then waits, writing a keep-alive comment
// whenever the stream has been silent for s.KeepAlive. It returns the
// subscription's errors, ctx's, the write's when the client is gone, and
// the decoding error of an event the hub could not decode (logged here,
// once for every protocol).
func (s *Server) Next(ctx context.Context, r *http.Request, sub *wire.Subscription, out *SSEWriter) (*wire.Item, error) {
	item, ready, err := sub.TryNext(ctx)
	if err == nil && !ready {
		if err := out.flush(); err != nil {
			return nil, err
		}
		item, err = s.wait(ctx, sub, out)
	}
	if err == nil && item.Err != nil {
		s.Logger.ErrorContext(ctx, "stream: undecodable event", "path", conversation.RedactedPath(r.URL.Path), "seq", item.Event.Seq, "err", item.Err)
		return nil, item.Err
	}
	return item, err
}

// wait waits for the subscription's next event, writing a keep-alive
// comment whenever the stream has been silent for s.KeepAlive.
func (s *Server) wait(ctx context.Context, sub *wire.Subscription, out *SSEWriter) (*wire.Item, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, s.KeepAlive)
		item, err := sub.Next(wait)
		idle := err != nil && wait.Err() != nil && ctx.Err() == nil
		cancel()
		if !idle {
			return item, err
		}
		// Next gave up only because the keep-alive interval passed; it
		// consumed nothing, so it is safe to call again.
		if err := out.comment("keep-alive"); err != nil {
			return nil, err
		}
	}
}

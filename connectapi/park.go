package connectapi

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/metrics"
	"github.com/convo-dev/convo/wire"
)

// Parked streams.
//
// Over HTTP/1.1 every StreamConversation holds a connection, and net/http
// holds for each the handler's goroutine (an 8 KiB stack while idle), a
// background reader, and about 10 KB of buffers, while most streams are
// idle most of the time. A parked stream holds none of that: once its
// start is sent and nothing is ready, the handler hijacks the connection
// and returns. The subscription then wakes the stream (SetNotify); a
// goroutine started for the occasion writes every ready event as a Connect
// envelope, all in one HTTP/1.1 chunk and one write, and ends. One small
// goroutine per connection blocks in a read, to notice the client leaving.
//
// Only the Connect protocol over HTTP/1.1 parks: that is what browsers
// speak to a server without TLS, and what an HTTP/1.1 proxy forwards. gRPC,
// gRPC-Web and HTTP/2 streams keep their handler. A parked stream ends as
// connect ends one (an end-of-stream message carrying the error, then the
// last chunk), and its connection is closed: the response says
// "Connection: close" from the start, so no client reuses it.

// DefaultParkWriteTimeout bounds one write to a parked stream's client: a
// client that does not read for this long (for between half of it and all
// of it: see extendDeadline) is cut off (its queue overflows
// first unless the conversation is quiet, but the stream can only say so
// once the write returns).
const DefaultParkWriteTimeout = 30 * time.Second

// maxChunk bounds what one write of a parked stream holds in memory.
const maxChunk = 64 << 10

// Parking runs the parked StreamConversation streams of a handler
// (Options.Parking). Its zero value is not usable; call NewParking.
type Parking struct {
	// WriteTimeout bounds one write to a client (default
	// DefaultParkWriteTimeout); set it before the handler serves.
	WriteTimeout time.Duration

	logger *slog.Logger
	shared *sharedEncodings // set by NewHandler

	mu      sync.Mutex
	streams map[*parkedStream]struct{}
	// emptied, when set, is closed (and cleared) once streams is empty:
	// Wait's. A stream may park while Wait waits (a handler that was
	// already running), which a WaitGroup would not allow.
	emptied chan struct{}
}

// NewParking returns a Parking that logs failed streams to logger.
func NewParking(logger *slog.Logger) *Parking {
	if logger == nil {
		logger = slog.Default()
	}
	return &Parking{WriteTimeout: DefaultParkWriteTimeout, logger: logger, streams: make(map[*parkedStream]struct{})}
}

// Len returns the number of parked streams open now.
func (p *Parking) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.streams)
}

// Wait waits until every parked stream has ended; a server shutting down
// calls it once its hub has ended their subscriptions (each then writes
// its end). When ctx ends first, it closes the connections still open and
// returns ctx's error.
func (p *Parking) Wait(ctx context.Context) error {
	p.mu.Lock()
	if len(p.streams) == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.emptied == nil {
		p.emptied = make(chan struct{})
	}
	done := p.emptied
	p.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		for s := range p.streams {
			_ = s.conn.Close()
		}
		p.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// parkable reports whether a StreamConversation request may park: the
// Connect protocol over HTTP/1.1.
func parkable(r *http.Request) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return false
	}
	switch r.Header.Get("Content-Type") {
	case "application/connect+json", "application/connect+proto":
		return true
	}
	return false
}

// park hands an idle stream over to p: it hijacks the connection and
// reports true, after which the handler returns at once and the
// subscription is the parked stream's. It reports false, changing nothing,
// when the stream cannot park.
//
//go:noinline
func (p *Parking) park(ctx context.Context, w *coalescingWriter, req connect.AnyRequest, sub *wire.Subscription, pauses bool) bool {
	if p == nil || w == nil || !w.parkable || req.Peer().Protocol != connect.ProtocolConnect {
		return false
	}
	w.flushNow()
	conn, _, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return false
	}
	w.hijacked = true
	// Not derived from the request's context: that would keep net/http's
	// connection state (its buffers, the request) alive for the stream's
	// life.
	streamCtx, cancel := context.WithCancel(context.Background())
	s := &parkedStream{
		parking: p, conn: conn, sub: sub,
		json:   req.Header().Get("Content-Type") == "application/connect+json",
		pauses: pauses,
		ctx:    streamCtx, cancel: cancel,
		end:       metrics.Detach(ctx),
		procedure: req.Spec().Procedure,
	}
	p.mu.Lock()
	p.streams[s] = struct{}{}
	p.mu.Unlock()
	go s.watch()
	sub.SetNotify(s.wake)
	return true
}

// parkedStream is one parked StreamConversation.
type parkedStream struct {
	parking *Parking
	conn    net.Conn
	sub     *wire.Subscription
	json    bool
	// pauses: the client asked for the events of pauses.
	pauses    bool
	ctx       context.Context
	cancel    context.CancelFunc
	end       func(context.Context, error)
	procedure string

	// mu guards writing and again: at most one goroutine writes, and a
	// wake-up while it does makes it look again.
	mu      sync.Mutex
	writing bool
	again   bool

	// deadline is the connection's write deadline (see extendDeadline).
	deadline time.Time

	closed atomic.Bool
	once   sync.Once
}

// wake is the subscription's notify: it starts a writer unless one runs.
// It runs under the hub's lock, so it only flips a flag or starts a
// goroutine.
func (s *parkedStream) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writing {
		s.again = true
		return
	}
	s.writing = true
	go s.write()
}

// write writes what is ready, again while wake-ups came meanwhile.
func (s *parkedStream) write() {
	for {
		if s.writeReady() {
			return
		}
		s.mu.Lock()
		if !s.again {
			s.writing = false
			s.mu.Unlock()
			return
		}
		s.again = false
		s.mu.Unlock()
	}
}

// chunkPool holds the buffers of writes, so an idle stream holds none.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// writeReady writes every ready event as one chunk, and the stream's end
// when it has ended. It reports whether the stream is over.
func (s *parkedStream) writeReady() bool {
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	buf := (*bp)[:chunkHeaderRoom]
	defer func() { *bp = buf[:0] }()
	for {
		// An end seen before TryNext finds nothing is final: nothing is
		// queued after it.
		ended := s.sub.Ended()
		item, ready, err := s.sub.TryNext(s.ctx)
		if err == nil && ready && item.Err != nil {
			err = item.Err
		}
		if err == nil && ready {
			// An event that cannot be encoded ends the stream with the
			// error (below): skipping it would be a gap the client cannot
			// see.
			var data []byte
			if !s.pauses && wire.IsPauseEvent(item.Payload) {
				data, err = marshalAs(s.json, wire.WithoutPauseEvents(item.Payload))
			} else {
				data, err = s.parking.shared.itemEncoding(item, s.json)
			}
			if err == nil {
				buf = appendEnvelope(buf, 0, data)
				if len(buf)-chunkHeaderRoom < maxChunk {
					continue
				}
				if s.writeChunk(buf, false) != nil {
					// The client left or stopped reading, perhaps in the
					// middle of the chunk: nothing more can be written.
					s.finish(nil)
					return true
				}
				buf = buf[:chunkHeaderRoom]
				continue
			}
		}
		if err == nil && ended == nil {
			// Nothing more now: send what was taken, and wait for a wake-up.
			if len(buf) > chunkHeaderRoom && s.writeChunk(buf, false) != nil {
				s.finish(nil)
				return true
			}
			return false
		}
		if err == nil {
			err = ended
		}
		s.finish(s.endStream(buf, err))
		return true
	}
}

// endStream writes what buf holds (a chunk being built), the
// end-of-stream message for err and the last chunk, and returns how the
// stream ended for the metrics (nil when the client had gone).
func (s *parkedStream) endStream(buf []byte, err error) error {
	if s.closed.Load() || s.ctx.Err() != nil {
		return nil
	}
	ce := toConnectError(s.ctx, s.parking.logger, s.procedure, err)
	end := endStreamMessage{Error: &endStreamError{Code: ce.Code().String(), Message: ce.Message()}}
	data, merr := json.Marshal(end)
	if merr != nil {
		data = []byte("{}")
	}
	buf = appendEnvelope(buf, endStreamFlag, data)
	if s.writeChunk(buf, true) != nil {
		return nil
	}
	return ce
}

// endStreamFlag marks the Connect protocol's end-of-stream message.
const endStreamFlag = 0b10

// endStreamMessage is the Connect protocol's end-of-stream message.
type endStreamMessage struct {
	Error *endStreamError `json:"error,omitempty"`
}

type endStreamError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// appendEnvelope appends one Connect envelope: flags, the length (4 bytes,
// big-endian) and data.
func appendEnvelope(buf []byte, flags byte, data []byte) []byte {
	buf = append(buf, flags)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(data)))
	return append(buf, data...)
}

// chunkHeaderRoom is the room a chunk's buffer keeps at its front for the
// chunk's size line (up to 8 hex digits and CRLF), so that the whole chunk
// goes out in one plain write.
const chunkHeaderRoom = 10

// writeChunk writes buf, chunkHeaderRoom bytes of room and the chunk's
// data, as one HTTP/1.1 chunk (followed by the last chunk when last) in one
// write. buf must hold data: an empty chunk would end the body.
func (s *parkedStream) writeChunk(buf []byte, last bool) error {
	var line [chunkHeaderRoom]byte
	size := append(strconv.AppendUint(line[:0], uint64(len(buf)-chunkHeaderRoom), 16), '\r', '\n')
	start := chunkHeaderRoom - len(size)
	copy(buf[start:], size)
	buf = append(buf, '\r', '\n')
	if last {
		buf = append(buf, "0\r\n\r\n"...)
	}
	if err := s.extendDeadline(); err != nil {
		return err
	}
	_, err := s.conn.Write(buf[start:])
	return err
}

// extendDeadline moves the connection's write deadline WriteTimeout ahead
// when less than half of it is left: moving it is a timer update, which a
// stream that keeps writing then pays once per half WriteTimeout, not once
// per write. A client that stops reading is so cut off after between half
// of WriteTimeout and all of it. Only the stream's one writer calls it.
func (s *parkedStream) extendDeadline() error {
	now := time.Now()
	timeout := s.parking.WriteTimeout
	if s.deadline.Sub(now) >= timeout/2 {
		return nil
	}
	s.deadline = now.Add(timeout)
	return s.conn.SetWriteDeadline(s.deadline)
}

// watch blocks in a read of the connection: the client sends nothing more
// after its request, so the read returns when it leaves (or when the
// stream closes the connection).
func (s *parkedStream) watch() {
	var b [1]byte
	_, _ = s.conn.Read(b[:])
	s.closed.Store(true)
	s.finish(nil)
}

// finish ends the stream once: the connection closes, the subscription is
// released, and the metrics record how it ended.
func (s *parkedStream) finish(err error) {
	s.once.Do(func() {
		s.closed.Store(true)
		_ = s.conn.Close()
		s.cancel()
		s.sub.Close()
		s.end(s.ctx, err)
		p := s.parking
		p.mu.Lock()
		delete(p.streams, s)
		if len(p.streams) == 0 && p.emptied != nil {
			close(p.emptied)
			p.emptied = nil
		}
		p.mu.Unlock()
	})
}

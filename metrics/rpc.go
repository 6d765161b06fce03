package metrics

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// RPC is a Connect handler interceptor that counts calls by procedure and
// outcome and times them. Unary calls and streams are timed apart: a
// stream lives as long as its client watches.
type RPC struct {
	calls          *prometheus.CounterVec
	unaryDuration  *prometheus.HistogramVec
	streamDuration *prometheus.HistogramVec
	openStreams    *prometheus.GaugeVec
}

var _ connect.Interceptor = (*RPC)(nil)

// NewRPC returns the interceptor with its metrics registered in reg.
func NewRPC(reg prometheus.Registerer) *RPC {
	m := &RPC{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "convo_rpc_calls_total",
			Help: "Connect calls handled, by procedure and code (ok, or the Connect error code).",
		}, []string{"procedure", "code"}),
		unaryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "convo_rpc_duration_seconds",
			Help:    "Time to handle a unary Connect call, by procedure.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"procedure"}),
		streamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "convo_rpc_stream_duration_seconds",
			Help:    "How long a server stream stayed open, by procedure.",
			Buckets: []float64{.1, 1, 10, 60, 300, 900, 3600, 4 * 3600},
		}, []string{"procedure"}),
		openStreams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "convo_rpc_streams_open",
			Help: "Server streams open now, by procedure.",
		}, []string{"procedure"}),
	}
	reg.MustRegister(m.calls, m.unaryDuration, m.streamDuration, m.openStreams)
	return m
}

// WrapUnary implements connect.Interceptor.
func (m *RPC) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		procedure := req.Spec().Procedure
		m.unaryDuration.WithLabelValues(procedure).Observe(time.Since(start).Seconds())
		m.calls.WithLabelValues(procedure, code(ctx, err)).Inc()
		return resp, err
	}
}

// Refused counts a call refused before connect's handler saw it (one
// that failed authentication, refused in HTTP middleware before its body
// was read), with the Connect code of err.
func (m *RPC) Refused(procedure string, err error) {
	m.calls.WithLabelValues(procedure, connect.CodeOf(err).String()).Inc()
}

// WrapStreamingClient implements connect.Interceptor; clients are not
// measured.
func (m *RPC) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (m *RPC) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		// A stream waits in next for as long as it is open: what is live
		// across the call is kept small (see connectapi's
		// StreamConversation), the rest is in calls that return.
		start := m.streamOpened(conn)
		d := &detachable{}
		err := next(context.WithValue(ctx, detachKey{}, d), conn)
		if d.detached {
			// The stream goes on without its handler: its end is recorded
			// when the function Detach returned is called.
			// Only the procedure is kept: not connect's stream state.
			procedure := conn.Spec().Procedure
			d.end = func(ctx context.Context, err error) { m.streamEnded(ctx, procedure, start, err) }
			close(d.ready)
			return err
		}
		m.streamEnded(ctx, conn.Spec().Procedure, start, err)
		return err
	}
}

type detachKey struct{}

// detachable lets a handler return before its stream ends.
type detachable struct {
	detached bool
	ready    chan struct{} // closed once end is set
	end      func(ctx context.Context, err error)
}

// Detach tells the RPC metrics that the stream of ctx's handler goes on
// after the handler returns (a parked stream, written without its
// goroutine). The stream then stays open in the metrics until the
// returned function is called, once, with how the stream ended (nil: the
// client left). Without RPC metrics in ctx it returns a function that does
// nothing. It must be called from the handler, before it returns.
func Detach(ctx context.Context) func(ctx context.Context, err error) {
	d, ok := ctx.Value(detachKey{}).(*detachable)
	if !ok {
		return func(context.Context, error) {}
	}
	d.detached = true
	d.ready = make(chan struct{})
	return func(ctx context.Context, err error) {
		<-d.ready
		d.end(ctx, err)
	}
}

//go:noinline
func (m *RPC) streamOpened(conn connect.StreamingHandlerConn) time.Time {
	m.openStreams.WithLabelValues(conn.Spec().Procedure).Inc()
	return time.Now()
}

//go:noinline
func (m *RPC) streamEnded(ctx context.Context, procedure string, start time.Time, err error) {
	m.streamDuration.WithLabelValues(procedure).Observe(time.Since(start).Seconds())
	m.calls.WithLabelValues(procedure, code(ctx, err)).Inc()
	// Last: a scrape that sees the stream closed sees its call counted.
	m.openStreams.WithLabelValues(procedure).Dec()
}

// code is the outcome label of a call: "ok", "canceled" when the client
// went away, or the Connect code of err.
func code(ctx context.Context, err error) string {
	switch {
	case err == nil && ctx.Err() != nil:
		// A stream whose client left ends without an error.
		return connect.CodeCanceled.String()
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled.String()
	}
	return connect.CodeOf(err).String()
}

package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/connectapi"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/guard"
	"github.com/convo-dev/convo/httpapi"
	"github.com/convo-dev/convo/metrics"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/web"
)

// newHTTPServer returns a server for long-lived streams: a read-header
// timeout against slow clients, but no write timeout, which would cut every
// stream at that moment. HTTP/1.1 and unencrypted HTTP/2 (h2c) are both
// served, so the Connect, gRPC and gRPC-Web protocols all work.
func newHTTPServer(handler http.Handler, logger *slog.Logger) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		Protocols:         protocols,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// routes serves every public route, behind the CORS policy when one is
// configured, behind the host and cross-site checks (guard.go), and with
// the time a request's body may take bounded (CONVO_BODY_TIMEOUT).
func (m *Main) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", m.healthz)
	// One write limiter for both APIs: a user's writes count together.
	writes := m.Config.Limits.writes()
	// One read cap for both APIs: a user's reads count together.
	reads := m.Config.Limits.reads()
	if m.Config.ParkStreams && m.parking == nil {
		m.parking = connectapi.NewParking(m.Logger)
		m.parking.WriteTimeout = m.Config.WriteTimeout
	}
	interceptors := []connect.Interceptor{m.metrics.rpc}
	if otel := m.rpcTelemetry(); otel != nil {
		// Outermost: the span holds the metrics' and the errors' work.
		interceptors = append([]connect.Interceptor{otel}, interceptors...)
	}
	path, api := connectapi.NewHandler(connectapi.Options{
		Store: m.readsGrouped(), Hub: m.hub, Auth: m.authenticator(), Logger: m.Logger,
		Interceptors: interceptors, Refused: m.metrics.rpc.Refused, Writes: writes, Parking: m.parking,
		Searches: m.Config.Limits.searches(), PageBytes: m.Config.SnapshotBytes, WriteTimeout: m.Config.WriteTimeout,
		Reads: reads, DemoModel: m.demoModel, MaxFilesPerMessage: m.Config.Files.MaxPerMessage,
		MaxFileBytes: m.Config.Files.MaxBytes, FileURLs: m.fileURLs, Tracer: m.voteTracer(),
		Presence: m.presence,
	})
	mux.Handle(path, api)
	if m.Config.PublicMetrics {
		mux.Handle("GET /metrics", metrics.Handler(m.metrics.registry))
	}
	mux.Handle("/", web.Handler())
	// The open protocols (SSE, AG-UI, history export) over the same hub.
	mux.Handle("/v1/", m.httpTelemetry().HTTP(httpapi.NewHandler(httpapi.Options{
		Store: m.readsGrouped(), Hub: m.hub, Auth: m.authenticator(), Logger: m.Logger, Writes: writes,
		WriteTimeout: m.Config.WriteTimeout, Reads: reads, PageBytes: m.Config.SnapshotBytes,
		Files: m.files, FileURLs: m.fileURLs, FileOwners: m.fileStore, MaxFilesPerMessage: m.Config.Files.MaxPerMessage,
		Models: m.models,
	})))
	m.cors = newCORS(m.Config.CORSOrigins)
	return guard.BodyDeadlines(m.bodyTimeout,
		withWriteDeadline(m.Config.WriteTimeout, m.withGuard(withCORS(m.cors, mux))))
}

// groupedReads is the store whose RecentState, the read of
// GetConversation, the history export and the AI SDK's /messages, goes
// through the snapshot reader: with the streams' snapshots, in groups, on
// connections of their own.
type groupedReads struct {
	*postgres.Store
	snapshots *postgres.SnapshotReader
}

// RecentState implements conversation.Store through the snapshot reader.
func (g groupedReads) RecentState(ctx context.Context, ownerID string, id uuid.UUID, maxBytes int) (conversation.State, error) {
	return g.snapshots.RecentState(ctx, ownerID, id, maxBytes)
}

// readsGrouped is the store the APIs use: m.store, its whole-conversation
// reads grouped with the snapshots.
func (m *Main) readsGrouped() conversation.Store {
	if m.snapshots == nil {
		return m.store
	}
	return groupedReads{Store: m.store, snapshots: m.snapshots}
}

// bodyTimeout is how long a request's body may take to arrive: an
// upload's CONVO_FILE_UPLOAD_TIMEOUT, any other's CONVO_BODY_TIMEOUT.
func (m *Main) bodyTimeout(r *http.Request) time.Duration {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/files" {
		return m.Config.Files.UploadTimeout
	}
	return m.Config.BodyTimeout
}

// withWriteDeadline gives every response a write deadline of timeout from
// the request's start: a client that does not read a response (the web
// app's files, a unary RPC, a history export) is cut off then, and a
// deadline left on a reused HTTP/1.1 connection by its previous response
// is replaced. Streams replace it with their own, per write (see
// connectapi.Options.WriteTimeout and httpapi.Options.WriteTimeout).
func withWriteDeadline(timeout time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout))
		h.ServeHTTP(w, r)
	})
}

// healthz answers 200 while the database answers a ping, 503 otherwise,
// and 503 once the server drains (SIGTERM).
func (m *Main) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	if m.draining.Load() {
		http.Error(w, "draining: shutting down", http.StatusServiceUnavailable)
		return
	}
	if err := m.pool.Ping(ctx); err != nil {
		m.Logger.Warn("health check: database unreachable", "err", err)
		http.Error(w, "database unreachable", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n")) //nolint:errcheck // the client may be gone
}

package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/internal/firstdelta"
)

// AdminHandler serves reg at /metrics, the Go profiler under
// /debug/pprof/ and the first-delta timing at /debug/first-delta (package
// firstdelta: off until a POST there): for operators only, on a private
// address.
func AdminHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(reg))
	mux.Handle("/debug/first-delta", firstdelta.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Admin is an HTTP server of AdminHandler on its own address
// (CONVO_ADMIN_ADDR of cmd/api and cmd/worker).
type Admin struct {
	listener net.Listener
	server   *http.Server
	served   chan error
}

// ServeAdmin listens on addr and serves AdminHandler(reg) there until
// Close.
func ServeAdmin(addr string, reg *prometheus.Registry, logger *slog.Logger) (*Admin, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on the admin address %s: %w", addr, err)
	}
	a := &Admin{
		listener: l,
		server: &http.Server{
			Handler:           AdminHandler(reg),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       120 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		served: make(chan error, 1),
	}
	go func() { a.served <- a.server.Serve(l) }()
	logger.Info("admin address serves /metrics, /debug/pprof/ and /debug/first-delta", "url", "http://"+a.Addr())
	return a, nil
}

// Addr is the host:port the server listens on.
func (a *Admin) Addr() string { return a.listener.Addr().String() }

// Close stops the server, letting requests in progress finish until ctx
// ends.
func (a *Admin) Close(ctx context.Context) error {
	err := a.server.Shutdown(ctx)
	if served := <-a.served; !errors.Is(served, http.ErrServerClosed) {
		err = errors.Join(err, served)
	}
	if err != nil {
		return fmt.Errorf("stop the admin server: %w", err)
	}
	return nil
}

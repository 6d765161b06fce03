// Command goworker is the Go runtime's runner for the worker conformance
// suite (conformance/README.md): a worker.Pool with the scripted model
// (the "conformance" provider, the default) and the echo and guarded_echo
// tools, configured by the runner contract's environment variables. It
// prints "ready" once the pool runs; on SIGTERM it drains for
// CONVO_DRAIN_TIMEOUT_MS, fails the replies still running ("… (shutting
// down)") and exits 0.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/worker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "goworker:", err)
		os.Exit(1)
	}
}

// settings are the runner contract's variables.
type settings struct {
	databaseURL   string
	workerID      string
	slots         int
	leaseSeconds  int
	batchInterval time.Duration
	drainTimeout  time.Duration
}

// readSettings reads the contract's variables through getenv. Every one
// is required: the driver sets them all, and a runner started by hand
// should say what it lacks rather than guess.
func readSettings(getenv func(string) string) (settings, error) {
	var s settings
	str := func(name string) (string, error) {
		v := getenv(name)
		if v == "" {
			return "", fmt.Errorf("%s is required (see conformance/README.md, Runners)", name)
		}
		return v, nil
	}
	num := func(name string, least int) (int, error) {
		v, err := str(name)
		if err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < least {
			return 0, fmt.Errorf("%s: want a whole number of %d or more, got %q", name, least, v)
		}
		return n, nil
	}
	var err error
	if s.databaseURL, err = str("DATABASE_URL"); err != nil {
		return s, err
	}
	if s.workerID, err = str("CONVO_WORKER_ID"); err != nil {
		return s, err
	}
	if s.slots, err = num("CONVO_WORKER_SLOTS", 1); err != nil {
		return s, err
	}
	if s.leaseSeconds, err = num("CONVO_LEASE_SECONDS", 1); err != nil {
		return s, err
	}
	ms, err := num("CONVO_BATCH_INTERVAL_MS", 1)
	if err != nil {
		return s, err
	}
	s.batchInterval = time.Duration(ms) * time.Millisecond
	if ms, err = num("CONVO_DRAIN_TIMEOUT_MS", 0); err != nil {
		return s, err
	}
	s.drainTimeout = time.Duration(ms) * time.Millisecond
	return s, nil
}

func run() error {
	s, err := readSettings(os.Getenv)
	if err != nil {
		return err
	}
	// Signals are caught before the pool starts, so that a SIGTERM sent
	// right after "ready" drains rather than kills.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	poolConfig, err := pgxpool.ParseConfig(s.databaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	poolConfig.MaxConns = 4 // the worker's default (CONVO_WORKER_DB_CONNS)
	db, err := pgxpool.NewWithConfig(context.Background(), poolConfig)
	if err != nil {
		return fmt.Errorf("connect to the database: %w", err)
	}
	defer db.Close()

	models := worker.NewModels(provider)
	models.Register(provider, scriptedModel{}, "")
	tools, err := worker.NewTools(echoTool(), guardedEchoTool())
	if err != nil {
		return err
	}
	// The pool's context is not the signal's: a SIGTERM drains it (below)
	// instead of stopping it at once.
	pool, err := worker.Start(context.Background(), db, worker.Config{
		Workers: s.slots, Name: s.workerID, LeaseSeconds: s.leaseSeconds, BatchInterval: s.batchInterval,
		Models: models, Tools: tools, Logger: logger,
	})
	if err != nil {
		return err
	}
	fmt.Println("ready")

	sig := <-stop
	logger.Info("draining", "signal", sig.String(), "drain_timeout", s.drainTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), s.drainTimeout)
	defer cancel()
	// Failing the replies still running after the drain takes a batch or
	// two; 10 s bounds it when the database does not answer.
	return pool.Drain(ctx, 10*time.Second)
}

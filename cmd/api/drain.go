package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// shutdownTimeout bounds how long unary calls in progress may take to
// finish once the server stops listening, and how long the workers may
// take to fail the replies still in flight after DrainTimeout.
const shutdownTimeout = 10 * time.Second

// drain stops the server so that its clients lose nothing (SIGTERM):
//
//  1. /healthz answers 503, so a load balancer stops sending new clients,
//     and the hub refuses new streams with a retryable Unavailable.
//  2. The in-process workers stop claiming prompts; those in flight go on
//     for up to DrainTimeout, while the rest of the drain proceeds.
//  3. Open streams go on for DrainGrace (skipped when there are none),
//     then end with a retryable Unavailable that carries the seq to
//     resume after: clients reconnect to another server and resume.
//  4. The HTTP server stops listening and lets unary calls finish.
//  5. Once the workers are done (replies completed, or failed when
//     DrainTimeout passed), the background loops stop.
func (m *Main) drain() error {
	m.draining.Store(true)
	var errs []error
	workersDone := make(chan error, 1)
	if m.workers != nil {
		workers := m.workers
		m.workers = nil
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), m.Config.DrainTimeout)
			defer cancel()
			workersDone <- workers.Drain(ctx, shutdownTimeout)
		}()
	} else {
		workersDone <- nil
	}
	if m.hub != nil {
		m.hub.Drain()
		if st := m.hub.Stats(); st.Subscribers > 0 && m.Config.DrainGrace > 0 {
			m.Logger.Info("draining: open streams go on, then are told to reconnect",
				"streams", st.Subscribers, "grace", m.Config.DrainGrace)
			time.Sleep(m.Config.DrainGrace)
		}
	}
	if m.stopBackground != nil {
		// Ends open streams (ErrClosed: clients reconnect and resume).
		m.stopBackground()
	}
	if m.parking != nil {
		// Parked streams write their end (the hub has ended them) and
		// close; the HTTP server does not know their connections.
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		if err := m.parking.Wait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("end parked streams: %w", err))
		}
		cancel()
	}
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := m.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop http server: %w", err))
		}
		if err := <-m.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		m.server = nil
	}
	if err := <-workersDone; err != nil {
		errs = append(errs, fmt.Errorf("stop workers: %w", err))
	}
	if m.admin != nil {
		// Last: metrics stay scrapeable while the server drains.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := m.admin.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		m.admin = nil
	}
	return errors.Join(errs...)
}

// adminAddr is the admin address's host:port, or "" without one.
func (m *Main) adminAddr() string {
	if m.admin == nil {
		return ""
	}
	return m.admin.Addr()
}

// Command bench measures convo's streaming path on one machine with one
// PostgreSQL (issue 4): commit-to-subscriber latency of a delta with 1 to
// 1,000 subscribers and with many active conversations, deltas per second
// through the SQL worker API against a bare INSERT + pg_notify, and the
// memory an idle subscriber holds, for each feed (NotifyFeed, LogicalFeed).
//
//	go run ./cmd/bench                 # private PostgreSQL in a temp dir
//	go run ./cmd/bench --database-url postgres://…/scratch
//
// --run peer and --run chat measure cmd/api as its own process: in a push
// server's measurement shape (peer.go), and under a chat product's load,
// many replies of the demo model at once with one reader each (chat.go;
// make bench-chat).
//
// It prints Markdown tables on stdout. Everything runs on loopback; every
// loop is bounded in count and in time (--timeout bounds the whole run).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// The bench runs its StreamConversation clients in a child process
	// (this same binary): see startClients.
	if url := os.Getenv(clientProcessEnv); url != "" {
		if err := runClientProcess(context.Background(), url, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "client process:", err)
			os.Exit(1)
		}
		return
	}

	if url := os.Getenv(peerClientsEnv); url != "" {
		if err := runPeerClients(context.Background(), url, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "peer client process:", err)
			os.Exit(1)
		}
		return
	}

	if url := os.Getenv(chatReadersEnv); url != "" {
		if err := runChatReaders(context.Background(), url, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "chat reader process:", err)
			os.Exit(1)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	err := m.Run(ctx)
	if cerr := m.Close(); cerr != nil {
		slog.Error("clean up", "err", cerr)
	}
	if err != nil {
		slog.Error("bench failed", "err", err)
		os.Exit(1)
	}
}

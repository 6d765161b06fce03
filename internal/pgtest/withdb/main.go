// Command withdb runs a test suite written in another language (the
// TypeScript and Python worker SDKs' tests) against a PostgreSQL server
// chosen and prepared as the Go tests' is (package pgtest): it migrates a
// template database, runs the command with CONVO_TEST_ADMIN_URL and
// CONVO_TEST_TEMPLATE set, and stops the server afterwards. The suite
// makes each test its own database from the template.
//
//	go run ./internal/pgtest/withdb -- npm test --prefix clients/worker
//
// It exits with the command's status.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/convo-dev/convo/internal/pgtest"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withdb [--] command [args...]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := 0
	err := pgtest.Run(ctx, func(env map[string]string) (bool, error) {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		err := cmd.Run()
		if exit, ok := errors.AsType[*exec.ExitError](err); ok {
			code = exit.ExitCode()
			return true, nil
		}
		return err != nil, err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "withdb:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

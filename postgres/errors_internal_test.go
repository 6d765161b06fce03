package postgres

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/conversation"
)

// TestTranslateUnavailable checks that every error meaning the database
// cannot serve right now becomes Unavailable with a Retry-After, never an
// internal error: too many connections (53300, also inside a connect
// error), other insufficient resources, a terminated backend, a
// connection failure.
func TestTranslateUnavailable(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"TooManyConnections":          &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"},
		"TooManyConnectionsOnConnect": fmt.Errorf("failed to connect: %w", &pgconn.PgError{Code: "53300", Severity: "FATAL"}),
		"ConnectError":                &pgconn.ConnectError{Config: &pgconn.Config{}},
		"OutOfMemory":                 &pgconn.PgError{Code: "53200", Message: "out of memory"},
		"BackendTerminated":           &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"},
		"CannotConnectNow":            &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"},
		"ConnectionFailure":           &pgconn.PgError{Code: "08006", Message: "connection failure"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := translate(err, "send message")
			if conversation.ErrorCode(got) != conversation.Unavailable || conversation.ErrorRetryAfter(got) != time.Second {
				t.Errorf("translate(%v) = %v (code %q, retry after %v); want unavailable, retry after 1s",
					err, got, conversation.ErrorCode(got), conversation.ErrorRetryAfter(got))
			}
			if !errors.Is(got, err) {
				t.Error("the cause is not kept for the logs")
			}
		})
	}
}

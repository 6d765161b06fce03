package postgres

import (
	"errors"
	"fmt"
	"strings"
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

// TestTranslateDataException: a value PostgreSQL cannot take (of class 22:
// a number past numeric's range, \u0000 in JSON, a lone surrogate, …) is
// the caller's input: Invalid, with PostgreSQL's message and detail, not
// an internal error.
func TestTranslateDataException(t *testing.T) {
	t.Parallel()
	for name, pgErr := range map[string]*pgconn.PgError{
		"NumericOverflow": {Code: "22003", Message: "value overflows numeric format"},
		"Untranslatable":  {Code: "22P05", Message: "unsupported Unicode escape sequence", Detail: `\u0000 cannot be converted to text.`},
		"InvalidText":     {Code: "22P02", Message: "invalid input syntax for type json", Detail: "Unicode low surrogate must follow a high surrogate."},
		"BadByteSequence": {Code: "22021", Message: `invalid byte sequence for encoding "UTF8": 0x00`},
		"InvalidDatetime": {Code: "22007", Message: "invalid input syntax for type timestamp with time zone"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := translate(fmt.Errorf("wrapped: %w", pgErr), "answer input request x")
			if conversation.ErrorCode(got) != conversation.Invalid {
				t.Fatalf("translate(%s) = %v (code %q); want invalid", pgErr.Code, got, conversation.ErrorCode(got))
			}
			msg := conversation.ErrorMessage(got)
			if !strings.HasPrefix(msg, "answer input request x: "+pgErr.Message) || !strings.Contains(msg, pgErr.Detail) {
				t.Errorf("message %q; want what was done, PostgreSQL's message and its detail", msg)
			}
		})
	}
	// Other classes stay what they were: a constraint violation is the
	// server's bug, internal.
	// A data exception of convo's own SQL, not of the caller's value,
	// stays internal.
	for _, code := range []string{"22012", "22023", "22001", "22004"} {
		if got := translate(&pgconn.PgError{Code: code, Message: "fault"}, "x"); conversation.ErrorCode(got) != conversation.Internal {
			t.Errorf("%s: code %q; want internal", code, conversation.ErrorCode(got))
		}
	}
	if got := translate(&pgconn.PgError{Code: "23514", Message: "check"}, "x"); conversation.ErrorCode(got) != conversation.Internal {
		t.Errorf("23514: code %q; want internal", conversation.ErrorCode(got))
	}
}

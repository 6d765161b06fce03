package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/db/sqlstate"
)

// translate turns a database error into a conversation.Error where the
// caller can act on it, once, at the store boundary. doing says what was
// being done, for the wrapped detail of internal errors.
func translate(err error, doing string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return conversation.Errorf(conversation.NotFound, "%s: not found", doing)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == sqlstate.NotFound:
			return conversation.Errorf(conversation.NotFound, "%s", pgErr.Message)
		case pgErr.Code == sqlstate.IllegalState:
			return conversation.Errorf(conversation.FailedPrecondition, "%s", pgErr.Message)
		case pgErr.Code == sqlstate.InvalidArgument:
			return conversation.Errorf(conversation.Invalid, "%s", pgErr.Message)
		case pgErr.Code == sqlstate.PermissionDenied:
			return conversation.Errorf(conversation.PermissionDenied, "%s", pgErr.Message)
		case pgErr.Code == sqlstate.QuotaExceeded:
			return conversation.Errorf(conversation.ResourceExhausted, "%s", pgErr.Message)
		case sqlstate.IsDataException(pgErr.Code):
			// A value PostgreSQL cannot take (1e999999 overflows numeric,
			// 22003; \u0000 in JSON, 22P05; a lone surrogate, 22P02; …)
			// is the caller's input, refused before anything was written.
			return dataException(doing, pgErr)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"),                                 // insufficient resources: too many connections, out of memory, disk full
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, starting up
			return unavailable(err)
		}
		return fmt.Errorf("%s: %w", doing, err)
	}
	if isConnectionError(err) {
		return unavailable(err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// dataException is conversation.Invalid for a data exception (class 22),
// with PostgreSQL's message and its detail, which says what was wrong:
// "answer input request …: unsupported Unicode escape sequence (\u0000
// cannot be converted to text.)".
func dataException(doing string, pgErr *pgconn.PgError) *conversation.Error {
	msg := pgErr.Message
	if pgErr.Detail != "" {
		msg += " (" + pgErr.Detail + ")"
	}
	return conversation.Errorf(conversation.Invalid, "%s: %s", doing, msg)
}

// unavailableRetryAfter is how long a client is told to wait when the
// database is unavailable: a restart or a burst of connections passes in
// seconds.
const unavailableRetryAfter = time.Second

// unavailable is conversation.Unavailable, with a Retry-After, that keeps
// its cause for logs.
func unavailable(cause error) error {
	e := conversation.Errorf(conversation.Unavailable, "database unavailable")
	e.RetryAfter = unavailableRetryAfter
	return fmt.Errorf("%w: %w", e, cause)
}

func isConnectionError(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}

// Package sqlstate is the one table, in Go, of the SQLSTATEs convo's SQL
// functions raise (db/functions; docs/events.md, "Errors (SQLSTATEs)"),
// and the reading of a PostgreSQL error's SQLSTATE.
package sqlstate

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs of class CV, raised by the SQL functions. An illegal call
// raises one of them and changes nothing.
const (
	// NotFound: an unknown prompt, block, tool call or conversation (or
	// one the caller does not own).
	NotFound = "CV001"
	// IllegalState: the object is not in a state that allows the change (a
	// write to an ended block, to a prompt that is not running, …).
	IllegalState = "CV002"
	// InvalidArgument: a malformed argument (a block type, metadata that
	// is not a JSON object, an empty name, …).
	InvalidArgument = "CV003"
	// QuotaExceeded: the user has too many prompts queued or running.
	QuotaExceeded = "CV004"
	// PermissionDenied: the caller's role in the conversation (a viewer,
	// a participant) may not do the action (docs/api.md, "Members").
	PermissionDenied = "CV005"
)

// All lists every SQLSTATE above.
var All = []string{NotFound, IllegalState, InvalidArgument, QuotaExceeded, PermissionDenied}

// Of returns the SQLSTATE of a PostgreSQL error in err's chain, or "".
func Of(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// inputExceptions are the data exceptions (class 22) that a value the
// caller gave causes when PostgreSQL reads it: 22003 numeric value out of
// range (a JSON number such as 1e999999), 22P05 untranslatable character
// (\u0000 in JSON), 22P02 invalid text representation (a lone surrogate
// escape, a malformed uuid or timestamp), 22021 a byte sequence invalid
// in UTF-8, 22025 an invalid escape sequence, 22007 and 22008 a malformed
// or out-of-range date or time. The rest of class 22 (division by zero,
// a truncation, a bad parameter inside a function, …) is a fault of
// convo's own SQL and stays internal, logged.
var inputExceptions = map[string]bool{
	"22003": true, "22P05": true, "22P02": true, "22021": true, "22025": true, "22007": true, "22008": true,
}

// IsDataException reports whether code is a data exception that the
// caller's value caused (inputExceptions): the API answers
// invalid_argument, as for CV003.
func IsDataException(code string) bool { return inputExceptions[code] }

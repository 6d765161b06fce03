package conversation

import (
	"errors"
	"fmt"
	"time"
)

// Code classifies an Error. The Connect layer maps each code to one Connect
// code in a single table.
type Code string

const (
	// Invalid: the request is malformed (bad id, empty text, …).
	Invalid Code = "invalid"
	// NotFound: the object does not exist, or the caller does not own it.
	NotFound Code = "not_found"
	// FailedPrecondition: the object is not in a state that allows the change.
	FailedPrecondition Code = "failed_precondition"
	// Unauthenticated: the caller's credentials are missing or invalid.
	Unauthenticated Code = "unauthenticated"
	// Unavailable: the database cannot be reached right now; retry later.
	Unavailable Code = "unavailable"
	// ResourceExhausted: a per-user or per-server limit was reached (too
	// many streams, writes or prompts in flight); the message names the
	// limit. Retry later, after Error.RetryAfter when it is set.
	ResourceExhausted Code = "resource_exhausted"
	// Internal: anything else; its detail is logged, never shown to callers.
	Internal Code = "internal"
)

// Error is a domain error: a Code and a message safe to show to the caller.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, when positive, is how long the caller should wait before
	// retrying (a rate limit's refill time).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Code of err's first *Error, or Internal when it has
// none (and "" when err is nil).
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// ErrorRetryAfter returns the RetryAfter of err's first *Error, or 0.
func ErrorRetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// ErrorMessage returns the caller-safe message of err's first *Error, or a
// generic text for an Internal error.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

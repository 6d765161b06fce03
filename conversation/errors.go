package conversation

import (
	"errors"
	"fmt"
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
	// Internal: anything else; its detail is logged, never shown to callers.
	Internal Code = "internal"
)

// Error is a domain error: a Code and a message safe to show to the caller.
type Error struct {
	Code    Code
	Message string
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

// ErrorMessage returns the caller-safe message of err's first *Error, or a
// generic text for an Internal error.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

package conversation

import (
	"errors"
	"fmt"
	"time"
)

// Code classifies an Error. Each protocol maps every code to its own (a
// Connect code, an HTTP status) in a single table; wire.Classify is where
// any error gets its code.
type Code string

const (
	// Invalid: the request is malformed (bad id, empty text, …).
	Invalid Code = "invalid"
	// NotFound: the object does not exist, or the caller has no role in
	// its conversation (the two are not told apart).
	NotFound Code = "not_found"
	// PermissionDenied: the caller's role in the conversation (a viewer,
	// a participant) may not do the action; the message names the role
	// and the action.
	PermissionDenied Code = "permission_denied"
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
	// Canceled: the caller cancelled the request (its context ended).
	Canceled Code = "canceled"
	// DeadlineExceeded: the request's deadline passed before it finished.
	DeadlineExceeded Code = "deadline_exceeded"
)

// Codes lists every Code, for the protocols' mapping tables to check that
// they are complete.
var Codes = []Code{
	Invalid, NotFound, PermissionDenied, FailedPrecondition, Unauthenticated, Unavailable,
	ResourceExhausted, Internal, Canceled, DeadlineExceeded,
}

// Error is a domain error: a Code and a message safe to show to the caller.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, when positive, is how long the caller should wait before
	// retrying (a rate limit's refill time).
	RetryAfter time.Duration
	// Overloaded marks a ResourceExhausted refusal by the server as a
	// whole, not by a limit of the caller's (too many sends waiting to be
	// written): HTTP answers it 503 Service Unavailable rather than 429,
	// so that proxies and clients treat it as the server's load; Connect
	// answers resource_exhausted either way.
	Overloaded bool
	// Resumable marks an error that ends a stream by design (the
	// subscriber fell behind, the server is shutting down, events were
	// compacted): the client opens the stream again, resuming after
	// AfterSeq. It is not a failure worth logging.
	Resumable bool
	// AfterSeq is where to resume: the seq of the last event the ended
	// stream delivered. Set by ResumeAfter.
	AfterSeq int64

	// base is the error ResumeAfter made this one from, so that errors.Is
	// still matches it.
	base *Error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the error ResumeAfter made e from, or nil.
func (e *Error) Unwrap() error {
	if e.base == nil {
		return nil
	}
	return e.base
}

// ResumeAfter returns e, a Resumable error, for a stream whose last
// delivered event is seq: its message tells the client where to resume,
// and errors.Is(result, e) holds.
func (e *Error) ResumeAfter(seq int64) *Error {
	return &Error{
		Code: e.Code, Message: fmt.Sprintf("%s; resume with afterSeq=%d", e.Message, seq),
		RetryAfter: e.RetryAfter, Resumable: true, AfterSeq: seq, base: e,
	}
}

// StreamEnd returns a Resumable error of code Unavailable: the kind that
// ends a stream by design, to be resumed.
func StreamEnd(message string) *Error {
	return &Error{Code: Unavailable, Message: message, Resumable: true}
}

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

// ErrorOverloaded reports whether err's first *Error is Overloaded.
func ErrorOverloaded(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Overloaded
}

// ErrorResume reports whether err ends a stream that the client should
// resume, and after which seq.
func ErrorResume(err error) (afterSeq int64, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.Resumable {
		return e.AfterSeq, true
	}
	return 0, false
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

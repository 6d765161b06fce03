package wire

import (
	"context"
	"errors"
	"time"

	"github.com/convo-dev/convo/conversation"
)

// Failure is what a protocol adapter needs to know of an error that failed
// a call or ended a stream: the one classification that connectapi maps to
// Connect codes and httpapi (its package httpx) to HTTP statuses.
type Failure struct {
	Code conversation.Code
	// Message is safe to show to the caller: a domain error's own, or a
	// generic text that hides an internal error's detail.
	Message string
	// RetryAfter, when positive, is how long the caller should wait.
	RetryAfter time.Duration
	// Overloaded: the server as a whole refused (conversation.Error's
	// Overloaded); HTTP answers 503.
	Overloaded bool
	// Resumable: the error ended a stream by design, and the caller opens
	// it again after AfterSeq.
	Resumable bool
	AfterSeq  int64
	// Log: the failure is the server's (Internal, or Unavailable that is
	// not a by-design stream end): log the error with its detail.
	Log bool
}

// Classify returns err's Failure. Context errors are Canceled and
// DeadlineExceeded; an error that is not a *conversation.Error is
// Internal.
func Classify(err error) Failure {
	switch {
	case err == nil:
		return Failure{}
	case errors.Is(err, context.Canceled):
		return Failure{Code: conversation.Canceled, Message: "request cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return Failure{Code: conversation.DeadlineExceeded, Message: "deadline exceeded"}
	}
	f := Failure{
		Code:       conversation.ErrorCode(err),
		Message:    conversation.ErrorMessage(err),
		RetryAfter: conversation.ErrorRetryAfter(err),
		Overloaded: conversation.ErrorOverloaded(err),
	}
	f.AfterSeq, f.Resumable = conversation.ErrorResume(err)
	f.Log = (f.Code == conversation.Internal || f.Code == conversation.Unavailable) && !f.Resumable
	return f
}

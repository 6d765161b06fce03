package wire_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

func TestClassify(t *testing.T) {
	limited := conversation.Errorf(conversation.ResourceExhausted, "too many writes")
	limited.RetryAfter = 3 * time.Second
	cases := []struct {
		name string
		err  error
		want wire.Failure
	}{
		{"nil", nil, wire.Failure{}},
		{"domain error", conversation.Errorf(conversation.NotFound, "conversation not found"),
			wire.Failure{Code: conversation.NotFound, Message: "conversation not found"}},
		{"wrapped domain error", fmt.Errorf("send: %w", conversation.Errorf(conversation.Invalid, "text: is required")),
			wire.Failure{Code: conversation.Invalid, Message: "text: is required"}},
		{"rate limit", limited,
			wire.Failure{Code: conversation.ResourceExhausted, Message: "too many writes", RetryAfter: 3 * time.Second}},
		{"internal error hides its detail and is logged", errors.New("pq: connection reset by peer at 10.0.0.7"),
			wire.Failure{Code: conversation.Internal, Message: "internal error", Log: true}},
		{"unavailable database is logged", conversation.Errorf(conversation.Unavailable, "database unavailable"),
			wire.Failure{Code: conversation.Unavailable, Message: "database unavailable", Log: true}},
		{"fell behind: resumable, not logged", stream.ErrFellBehind.ResumeAfter(41),
			wire.Failure{Code: conversation.Unavailable, Message: "subscriber fell behind the conversation's events; resume with afterSeq=41",
				Resumable: true, AfterSeq: 41}},
		{"shutting down refuses a stream: resumable, not logged", stream.ErrClosed,
			wire.Failure{Code: conversation.Unavailable, Message: "server is shutting down; reconnect and resume", Resumable: true}},
		{"deleted: not resumable", stream.ErrDeleted,
			wire.Failure{Code: conversation.NotFound, Message: "the conversation was deleted"}},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled),
			wire.Failure{Code: conversation.Canceled, Message: "request cancelled"}},
		{"deadline", context.DeadlineExceeded,
			wire.Failure{Code: conversation.DeadlineExceeded, Message: "deadline exceeded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := wire.Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v)\n got %+v\nwant %+v", tc.err, got, tc.want)
			}
		})
	}
}

// TestResumeAfterKeepsIdentity checks that the copy a subscription returns
// still matches its sentinel, so adapters can tell the ends apart.
func TestResumeAfterKeepsIdentity(t *testing.T) {
	for _, sentinel := range []*conversation.Error{stream.ErrFellBehind, stream.ErrEventsCompacted, stream.ErrClosed} {
		end := sentinel.ResumeAfter(7)
		if !errors.Is(end, sentinel) {
			t.Errorf("errors.Is(%v, its sentinel) = false", end)
		}
		if errors.Is(end, stream.ErrDeleted) {
			t.Errorf("%v matches ErrDeleted", end)
		}
		if at, ok := conversation.ErrorResume(fmt.Errorf("stream: %w", end)); !ok || at != 7 {
			t.Errorf("ErrorResume(wrapped %v) = %d, %v; want 7, true", end, at, ok)
		}
	}
}

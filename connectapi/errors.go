package connectapi

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/stream"
)

// codes maps each domain error code to its Connect code: the one place
// where that mapping lives.
var codes = map[conversation.Code]connect.Code{
	conversation.Invalid:            connect.CodeInvalidArgument,
	conversation.NotFound:           connect.CodeNotFound,
	conversation.FailedPrecondition: connect.CodeFailedPrecondition,
	conversation.Unauthenticated:    connect.CodeUnauthenticated,
	conversation.Unavailable:        connect.CodeUnavailable,
	conversation.ResourceExhausted:  connect.CodeResourceExhausted,
	conversation.Internal:           connect.CodeInternal,
}

// toConnectError turns err into a *connect.Error. A domain error keeps its
// message; anything else is logged with its detail and returned as
// Internal without it. A cancelled context stays Canceled.
func toConnectError(ctx context.Context, logger *slog.Logger, procedure string, err error) error {
	if err == nil {
		return nil
	}
	var connectErr *connect.Error
	if errors.As(err, &connectErr) {
		return connectErr
	}
	if errors.Is(err, context.Canceled) {
		return connect.NewError(connect.CodeCanceled, errors.New("request cancelled"))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded"))
	}
	code := conversation.ErrorCode(err)
	// A draining server refuses streams by design: not worth an error log.
	if (code == conversation.Internal || code == conversation.Unavailable) && !errors.Is(err, stream.ErrClosed) {
		logger.ErrorContext(ctx, "request failed", "procedure", procedure, "code", code, "err", err)
	}
	ce := connect.NewError(codes[code], errors.New(conversation.ErrorMessage(err)))
	if d := conversation.ErrorRetryAfter(err); d > 0 {
		ce.Meta().Set("Retry-After", limit.RetryAfterHeader(d))
	}
	return ce
}

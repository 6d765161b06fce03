package connectapi

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/wire"
)

// codes maps each domain error code to its Connect code: the one place
// where that mapping lives.
var codes = map[conversation.Code]connect.Code{
	conversation.Invalid:            connect.CodeInvalidArgument,
	conversation.NotFound:           connect.CodeNotFound,
	conversation.PermissionDenied:   connect.CodePermissionDenied,
	conversation.FailedPrecondition: connect.CodeFailedPrecondition,
	conversation.Unauthenticated:    connect.CodeUnauthenticated,
	conversation.Unavailable:        connect.CodeUnavailable,
	conversation.ResourceExhausted:  connect.CodeResourceExhausted,
	conversation.Internal:           connect.CodeInternal,
	conversation.Canceled:           connect.CodeCanceled,
	conversation.DeadlineExceeded:   connect.CodeDeadlineExceeded,
}

// errorInterceptor is where every failed call becomes a *connect.Error:
// handlers and the interceptors inside it return domain errors, which it
// classifies (wire.Classify), logs when the failure is the server's, and
// maps. An error that already is a *connect.Error (connect's own) passes
// as it is. A stream whose client went away ends without an error.
type errorInterceptor struct {
	logger *slog.Logger
}

func (i errorInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err != nil {
			return nil, i.toConnect(ctx, req.Spec().Procedure, err)
		}
		return res, nil
	}
}

func (i errorInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i errorInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		if err == nil || ctx.Err() != nil {
			return nil // nobody reads the end of a stream whose client left
		}
		return i.toConnect(ctx, conn.Spec().Procedure, err)
	}
}

// toConnect maps err (see errorInterceptor).
func (i errorInterceptor) toConnect(ctx context.Context, procedure string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return toConnectError(ctx, i.logger, procedure, err)
}

// toConnectError classifies err (wire.Classify), logs it when the failure
// is the server's, and returns it as a *connect.Error.
func toConnectError(ctx context.Context, logger *slog.Logger, procedure string, err error) *connect.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	f := wire.Classify(err)
	if f.Log {
		logger.ErrorContext(ctx, "request failed", "procedure", procedure, "code", f.Code, "err", err)
	}
	code, ok := codes[f.Code]
	if !ok {
		code = connect.CodeInternal
	}
	ce = connect.NewError(code, errors.New(f.Message))
	if f.RetryAfter > 0 {
		ce.Meta().Set("Retry-After", limit.RetryAfterHeader(f.RetryAfter))
	}
	return ce
}

// Package connectapi serves convo's Connect API (proto/convo/v1): the
// ConversationService handlers, authentication, and the mapping of domain
// errors to Connect codes.
package connectapi

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/stream"
)

// protoJSON writes model configurations in the same proto3 JSON form the
// event log uses.
var protoJSON = protojson.MarshalOptions{}

// Options configures the handler.
type Options struct {
	Store  conversation.Store
	Auth   Authenticator
	Logger *slog.Logger
	// Hub serves StreamConversation; nil answers it Unimplemented. Its
	// Decode must be DecodeEvent.
	Hub *stream.Hub
	// Interceptors wrap every call, outermost first, before
	// authentication, so they also see calls it refuses (metrics,
	// logging).
	Interceptors []connect.Interceptor
	// Writes, when set, rate-limits each user's write RPCs (see
	// writeProcedures); refusals are ResourceExhausted with Retry-After.
	Writes *limit.Writes
}

// NewHandler returns the path prefix and handler of ConversationService.
func NewHandler(opts Options) (string, http.Handler) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	shared := newSharedEncodings()
	svc := &service{store: opts.Store, hub: opts.Hub, shared: shared, logger: opts.Logger, now: time.Now}
	interceptors := append(slices.Clip(opts.Interceptors), interceptor{auth: opts.Auth}, writeLimiter{writes: opts.Writes, logger: opts.Logger})
	path, handler := convov1connect.NewConversationServiceHandler(svc, handlerOptions(interceptors, shared)...)
	return path, withCoalescing(handler)
}

// handlerOptions are the handler's Connect options: connect's defaults but
// for a request size limit, no compression of small messages, and codecs
// that encode the hub's shared messages once (see codecOptions).
func handlerOptions(interceptors []connect.Interceptor, shared *sharedEncodings) []connect.HandlerOption {
	return append([]connect.HandlerOption{
		connect.WithInterceptors(interceptors...),
		connect.WithReadMaxBytes(maxRequestBytes),
		connect.WithCompressMinBytes(compressMinBytes),
	}, codecOptions(shared)...)
}

// service implements convov1connect.ConversationServiceHandler.
type service struct {
	convov1connect.UnimplementedConversationServiceHandler

	store conversation.Store
	hub   *stream.Hub
	// shared holds the encodings of the hub's messages, which every
	// subscriber of a conversation sends.
	shared *sharedEncodings
	logger *slog.Logger
	now    func() time.Time
}

var _ convov1connect.ConversationServiceHandler = (*service)(nil)

// fail converts err for the client (see toConnectError).
func (s *service) fail(ctx context.Context, procedure string, err error) error {
	return toConnectError(ctx, s.logger, procedure, err)
}

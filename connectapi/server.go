// Package connectapi serves convo's Connect API (proto/convo/v1): the
// ConversationService handlers, authentication, the mapping of domain
// errors to Connect codes (one interceptor), and the codecs that encode a
// streamed message once for all its subscribers.
package connectapi

import (
	"log/slog"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/presence"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// maxRequestBytes bounds every request message; larger ones are refused
// with ResourceExhausted before they are decoded.
const maxRequestBytes = 1 << 20

// Options configures the handler.
type Options struct {
	Store  conversation.Store
	Auth   auth.Authenticator
	Logger *slog.Logger
	// Hub serves StreamConversation; nil answers it Unimplemented.
	Hub *wire.Hub
	// Interceptors wrap every call, outermost first, before the error
	// mapping, so they see calls refused and the Connect codes sent
	// (metrics); calls refused before connect reads them go to Refused.
	Interceptors []connect.Interceptor
	// Writes, when set, rate-limits each user's write RPCs (see
	// writeProcedures); refusals are ResourceExhausted with Retry-After.
	Writes *limit.Writes
	// Searches, when set, bounds each user's SearchMessages calls (a
	// rate, and searches running at once) and the server's; refusals are
	// ResourceExhausted with Retry-After.
	Searches *limit.Searches
	// Refused, when set, is told of every call refused before connect
	// reads it (authentication; see admission), which the interceptors
	// never see.
	Refused func(procedure string, err error)
	// Parking, when set, parks idle StreamConversation streams of the
	// Connect protocol over HTTP/1.1 (park.go); nil: every stream keeps
	// its handler.
	Parking *Parking
	// Reads, when set, caps each user's GetConversation and ListMessages
	// calls running at once, each held until its answer is written;
	// refusals are ResourceExhausted with Retry-After.
	Reads *limit.Reads
	// PageBytes bounds GetConversation's messages and a ListMessages page
	// as HubOptions.SnapshotBytes bounds a snapshot. Default
	// stream.DefaultSnapshotBytes.
	PageBytes int
	// WriteTimeout bounds every write to a StreamConversation client that
	// keeps its handler, the snapshot's included: a client that does not
	// read for this long is cut off, and what its stream held is released.
	// Default DefaultWriteTimeout. (A parked stream has its own:
	// Parking.WriteTimeout.)
	WriteTimeout time.Duration
	// FileURLs signs the URLs of the files messages hold (nil: none).
	FileURLs wire.FileURLs
	// MaxFileBytes is GetServerInfo's max_file_bytes. Default
	// files.DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxFilesPerMessage bounds the file_ids of SendMessage and
	// EditMessage. Default files.DefaultMaxFilesPerMessage.
	MaxFilesPerMessage int
	// DemoModel says GetServerInfo's demo_model: the server runs
	// in-process workers whose default model is the demo model.
	DemoModel bool
	// Tracer, when set, records every rating (SubmitFeedback) and
	// comparison vote (VoteComparison) as a span on the rated reply's
	// trace (votes.go); nil records none.
	Tracer trace.TracerProvider
	// Presence, when set, serves StreamConversation's include_presence
	// and SetTyping (presence.go); nil: include_presence is ignored and
	// SetTyping answers Unimplemented.
	Presence *presence.Tracker
	// Typing rate-limits each user's SetTyping calls; refusals are
	// ResourceExhausted with Retry-After. Nil: limit.DefaultTypingRate in
	// bursts of limit.DefaultTypingBurst.
	Typing *limit.Typing
}

// DefaultWriteTimeout is Options.WriteTimeout's default.
const DefaultWriteTimeout = 30 * time.Second

// NewHandler returns the path prefix and handler of ConversationService.
func NewHandler(opts Options) (string, http.Handler) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PageBytes <= 0 {
		opts.PageBytes = stream.DefaultSnapshotBytes
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = files.DefaultMaxFileBytes
	}
	if opts.MaxFilesPerMessage <= 0 {
		opts.MaxFilesPerMessage = files.DefaultMaxFilesPerMessage
	}
	if opts.Typing == nil {
		opts.Typing = limit.NewTyping(limit.DefaultTypingRate, limit.DefaultTypingBurst)
	}
	shared := newSharedEncodings()
	svc := &service{store: opts.Store, hub: opts.Hub, shared: shared, logger: opts.Logger, now: time.Now,
		parking: opts.Parking, pageBytes: opts.PageBytes, searches: opts.Searches, demoModel: opts.DemoModel,
		maxFiles: opts.MaxFilesPerMessage, maxFileBytes: opts.MaxFileBytes, urls: opts.FileURLs,
		presence: opts.Presence, typing: opts.Typing}
	if opts.Tracer != nil {
		svc.tracer = opts.Tracer.Tracer("github.com/convo-dev/convo/connectapi")
	}
	if opts.Parking != nil {
		opts.Parking.shared = shared
	}
	interceptors := append(slices.Clip(opts.Interceptors),
		errorInterceptor{logger: opts.Logger}, writeLimiter{writes: opts.Writes})
	handlerOpts := handlerOptions(interceptors, shared)
	path, handler := convov1connect.NewConversationServiceHandler(svc, handlerOpts...)
	return path, &admission{
		auth: opts.Auth, logger: opts.Logger, errors: connect.NewErrorWriter(handlerOpts...), refused: opts.Refused, reads: opts.Reads,
		next: withCoalescing(handler, opts.Parking != nil, opts.WriteTimeout),
	}
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
	hub   *wire.Hub
	// shared holds the encodings of the hub's messages, which every
	// subscriber of a conversation sends.
	shared  *sharedEncodings
	logger  *slog.Logger
	now     func() time.Time
	parking *Parking
	// tracer records votes on replies' traces; nil: none (votes.go).
	tracer trace.Tracer
	// pageBytes bounds a ListMessages page.
	pageBytes int
	// searches bounds SearchMessages (nil: no bound).
	searches *limit.Searches
	// demoModel is GetServerInfo's demo_model.
	demoModel bool
	// maxFiles bounds the files of one message; maxFileBytes one file.
	maxFiles     int
	maxFileBytes int64
	// urls signs the URLs of files in the messages it returns.
	urls wire.FileURLs
	// presence tracks who views and types (nil: none); typing bounds
	// SetTyping.
	presence *presence.Tracker
	typing   *limit.Typing
}

var _ convov1connect.ConversationServiceHandler = (*service)(nil)

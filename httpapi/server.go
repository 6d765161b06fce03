package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/httpapi/agui"
	"github.com/convo-dev/convo/httpapi/aisdk"
	"github.com/convo-dev/convo/httpapi/events"
	httpfiles "github.com/convo-dev/convo/httpapi/files"
	"github.com/convo-dev/convo/httpapi/history"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/httpapi/openai"
	"github.com/convo-dev/convo/httpapi/shares"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/stream"
	"github.com/convo-dev/convo/wire"
)

// Options configures the handler.
type Options struct {
	Store conversation.Store
	// Hub serves the streams.
	Hub  *wire.Hub
	Auth auth.Authenticator
	// Logger defaults to slog.Default.
	Logger *slog.Logger
	// KeepAlive is how long a stream may stay silent before a comment line
	// is sent, so that proxies keep it open. Default 15 s.
	KeepAlive time.Duration
	// Retry is the reconnection delay SSE streams ask EventSource for.
	// Default 2 s.
	Retry time.Duration
	// Writes, when set, rate-limits each user's writes (POST /v1/agui):
	// a refusal is 429 with Retry-After.
	Writes *limit.Writes
	// WriteTimeout bounds every write to a stream's client, the first
	// (the snapshot) included: a client that does not read for this long
	// is cut off. Default 30 s.
	WriteTimeout time.Duration
	// Reads, when set, caps each user's history exports and AI SDK
	// messages reads running at once, each held until its answer is
	// written: a refusal is 429 with Retry-After.
	Reads *limit.Reads
	// PageBytes bounds the messages of a history export or an AI SDK
	// messages read (the latest ones, then pages of older ones) as
	// HubOptions.SnapshotBytes bounds a snapshot. Default
	// stream.DefaultSnapshotBytes.
	PageBytes int
	// Files, when set, serves the file routes (POST /v1/files, GET
	// /v1/files/{id} and /v1/files/{id}/content; package files), with
	// FileURLs signing their content's URLs and FileOwners finding the
	// owner a signed URL names (both required with Files). FileURLs
	// also signs the URLs of the files messages hold (nil: none).
	Files *files.Service
	// MaxFilesPerMessage bounds the files of a message the AI SDK or
	// AG-UI sends (default files.DefaultMaxFilesPerMessage).
	MaxFilesPerMessage int
	FileURLs           *files.Signer
	FileOwners         httpfiles.Owners
	// Models are the model names OpenAI's Responses API (POST
	// /v1/responses) accepts, the workers' models; none: any name, passed
	// on to the workers.
	Models []string
}

// NewHandler returns the handler of every endpoint under /v1/ (mount it
// at "/v1/"). Errors are JSON objects {"code", "message"} with the Connect
// API's code names and the matching HTTP status.
func NewHandler(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = 2 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	if opts.PageBytes <= 0 {
		opts.PageBytes = stream.DefaultSnapshotBytes
	}
	s := &httpx.Server{Store: opts.Store, Hub: opts.Hub, Auth: opts.Auth, Logger: opts.Logger, Writes: opts.Writes,
		KeepAlive: opts.KeepAlive, Retry: opts.Retry, WriteTimeout: opts.WriteTimeout, Reads: opts.Reads, PageBytes: opts.PageBytes,
		Files: opts.Files, MaxFilesPerMessage: opts.MaxFilesPerMessage}
	if opts.FileURLs != nil {
		// Not a nil *files.Signer in the interface: httpx tells a server
		// without files by a nil URLs.
		s.URLs = opts.FileURLs
	}
	ag, ai := agui.New(s), aisdk.New(s)
	mux := http.NewServeMux()
	// Every route authenticates first, before any body is read.
	route := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.WithUser(h)) }
	route("GET /v1/conversations/{id}/events", events.New(s).ServeHTTP)
	route("GET /v1/conversations/{id}/agui", ag.Follow)
	route("POST /v1/agui", s.JSONBody(agui.MaxRunInputBytes, false, ag.Run))
	route("GET /v1/conversations/{id}/history", history.New(s).ServeHTTP)
	route("POST /v1/ai-sdk/chat", s.JSONBody(aisdk.MaxChatRequestBytes, false, ai.Chat))
	route("GET /v1/ai-sdk/chat/{id}/stream", ai.Resume)
	route("GET /v1/ai-sdk/chat/{id}/messages", ai.Messages)
	// Stopping takes no body; useChat's stop sends none.
	route("POST /v1/ai-sdk/chat/{id}/stop", s.JSONBody(aisdk.MaxStopBytes, true, ai.Stop))
	// A share token opens the share routes, whatever the Authorization
	// header says: they take no user.
	shares.New(s).Routes(mux)
	// OpenAI's Responses API refuses in OpenAI's error shape, its own
	// authentication's included.
	openai.New(s, opts.Models).Routes(mux)
	if opts.Files != nil {
		fh := httpfiles.New(s, opts.Files, opts.FileURLs, opts.FileOwners)
		route("POST /v1/files", fh.Upload)
		route("GET /v1/files/{id}", fh.Metadata)
		// A signed URL stands in for the bearer token: Content
		// authenticates itself.
		mux.HandleFunc("GET /v1/files/{id}/content", fh.Content)
	}
	return mux
}

package httpx

import (
	"log/slog"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/wire"
)

// Server is what the handlers of every protocol are built on. httpapi
// fills it from its Options, defaults applied; it is not modified after.
type Server struct {
	Store conversation.Store
	// Hub serves the streams.
	Hub *wire.Hub
	// URLs signs the URLs of the files messages hold (nil: none).
	URLs wire.FileURLs
	// Files keeps the files protocols' messages carry inline (an AI SDK
	// data URL); nil: such files are refused.
	Files *files.Service
	// MaxFilesPerMessage bounds the files of one message (default
	// files.DefaultMaxFilesPerMessage).
	MaxFilesPerMessage int
	Auth               auth.Authenticator
	Logger             *slog.Logger
	// Writes rate-limits each user's writes (WriteRequest); nil: no limit.
	Writes *limit.Writes
	// KeepAlive is the silence after which Next writes a comment line;
	// Retry the reconnection delay StartSSE asks EventSource for;
	// WriteTimeout bounds each write to a stream (SSEWriter).
	KeepAlive, Retry, WriteTimeout time.Duration
	// Reads caps each user's whole-conversation reads running at once
	// (the history export, the AI SDK's messages); nil: no cap.
	Reads *limit.Reads
	// PageBytes bounds the messages those reads answer with, as a
	// snapshot is bounded (stream.HubOptions.SnapshotBytes).
	PageBytes int
}

// ProtoJSON is the JSON the Connect API uses: proto3 JSON names, zero
// values omitted.
var ProtoJSON = protojson.MarshalOptions{}

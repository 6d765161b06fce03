package connectapi

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// Limits on request fields; each refusal names the field.
const (
	maxMessageText   = 100_000
	maxTitle         = 200
	maxComment       = 2_000
	maxSearchQuery   = 500
	maxModelName     = 200
	maxSystemPrompt  = 20_000
	defaultPageSize  = 20
	maxPageSize      = 100
	maxSearchResults = 50
	// maxRequestBytes bounds every request message; larger ones are
	// refused with ResourceExhausted before they are decoded.
	maxRequestBytes = 1 << 20
)

func invalidArgument(field, format string, args ...any) *connect.Error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// requireID parses a required UUID field.
func requireID(field, value string) (uuid.UUID, error) {
	if value == "" {
		return uuid.Nil, invalidArgument(field, "is required")
	}
	return parseID(field, value)
}

func parseID(field, value string) (uuid.UUID, error) {
	id, err := uuid.Parse(value)
	if err != nil || len(value) != 36 {
		return uuid.Nil, invalidArgument(field, "%q is not a UUID", truncate(value, 64))
	}
	return id, nil
}

// optionalID parses a UUID field that may be empty.
func optionalID(field, value string) (uuid.NullUUID, error) {
	if value == "" {
		return uuid.NullUUID{}, nil
	}
	id, err := parseID(field, value)
	return uuid.NullUUID{UUID: id, Valid: err == nil}, err
}

// checkText checks a UTF-8 string field's length in characters.
func checkText(field, value string, required bool, limit int) error {
	if !utf8.ValidString(value) {
		return invalidArgument(field, "is not valid UTF-8")
	}
	if required && value == "" {
		return invalidArgument(field, "is required")
	}
	if n := utf8.RuneCountInString(value); n > limit {
		return invalidArgument(field, "is %d characters long; the limit is %d", n, limit)
	}
	for _, r := range value {
		if r == 0 {
			return invalidArgument(field, "must not contain NUL characters")
		}
	}
	return nil
}

func pageSize(field string, size int32, limit int) (int, error) {
	switch {
	case size < 0 || int(size) > limit:
		return 0, invalidArgument(field, "must be between 1 and %d (0 for the default), got %d", limit, size)
	case size == 0:
		return min(defaultPageSize, limit), nil
	}
	return int(size), nil
}

// Page tokens are opaque to clients: base64url of the last row's time
// (Unix microseconds) and id.
func encodePageToken(c conversation.PageCursor) string {
	b := make([]byte, 8, 24)
	binary.BigEndian.PutUint64(b, uint64(c.Time.UnixMicro()))
	b = append(b, c.ID[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(field, token string) (*conversation.PageCursor, error) {
	if token == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != 24 {
		return nil, invalidArgument(field, "is not a page token this server issued")
	}
	micros := binary.BigEndian.Uint64(b[:8])
	if micros > math.MaxInt64 {
		return nil, invalidArgument(field, "is not a page token this server issued")
	}
	c := &conversation.PageCursor{Time: time.UnixMicro(int64(micros))}
	copy(c.ID[:], b[8:])
	return c, nil
}

// CheckMessageText checks a user's message as SendMessage does (required,
// at most 100,000 characters, not only whitespace, no NUL). The error is an
// InvalidArgument *connect.Error whose message names field.
func CheckMessageText(field, text string) error {
	if err := checkText(field, text, true, maxMessageText); err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return invalidArgument(field, "must not be only whitespace")
	}
	return nil
}

// ModelConfigJSON validates a model configuration as SendMessage does and
// returns the JSON object stored on the prompt. The error is an
// InvalidArgument *connect.Error whose message names field (or a subfield).
func ModelConfigJSON(field string, cfg *convov1.ModelConfig) ([]byte, error) {
	return modelConfigJSON(field, cfg)
}

// modelConfigJSON validates a model configuration and returns it as the
// JSON object stored on the prompt (proto3 JSON, lowerCamel names).
func modelConfigJSON(field string, cfg *convov1.ModelConfig) ([]byte, error) {
	if cfg == nil {
		return []byte("{}"), nil
	}
	if err := checkText(field+".provider", cfg.GetProvider(), false, maxModelName); err != nil {
		return nil, err
	}
	if err := checkText(field+".model", cfg.GetModel(), false, maxModelName); err != nil {
		return nil, err
	}
	if err := checkText(field+".systemPrompt", cfg.GetSystemPrompt(), false, maxSystemPrompt); err != nil {
		return nil, err
	}
	if cfg.Temperature != nil {
		if t := cfg.GetTemperature(); math.IsNaN(t) || t < 0 || t > 2 {
			return nil, invalidArgument(field+".temperature", "must be between 0 and 2, got %v", t)
		}
	}
	if cfg.MaxTokens != nil && (cfg.GetMaxTokens() < 1 || cfg.GetMaxTokens() > 1_000_000) {
		return nil, invalidArgument(field+".maxTokens", "must be between 1 and 1000000, got %d", cfg.GetMaxTokens())
	}
	return protoJSON.Marshal(cfg)
}

// truncate shortens s to at most n bytes (on a rune boundary) for error
// messages that quote client input.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

var errNoUser = errors.New("no authenticated user in the request context")

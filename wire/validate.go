package wire

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// Limits on request fields, the same in every protocol; each refusal
// names the field. Lengths count characters.
const (
	MaxMessageText   = 100_000
	MaxTitle         = 200
	MaxComment       = 2_000
	MaxSearchQuery   = 500
	MaxModelName     = 200
	MaxSystemPrompt  = 20_000
	DefaultPageSize  = 20
	MaxPageSize      = 100
	MaxSearchResults = 50
)

// Invalid returns a conversation.Invalid error whose message names field.
func Invalid(field, format string, args ...any) *conversation.Error {
	return conversation.Errorf(conversation.Invalid, "%s: %s", field, fmt.Sprintf(format, args...))
}

// RequireID parses a required UUID field.
func RequireID(field, value string) (uuid.UUID, error) {
	if value == "" {
		return uuid.Nil, Invalid(field, "is required")
	}
	return parseID(field, value)
}

func parseID(field, value string) (uuid.UUID, error) {
	id, err := uuid.Parse(value)
	if err != nil || len(value) != 36 {
		return uuid.Nil, Invalid(field, "%q is not a UUID", Truncate(value, 64))
	}
	return id, nil
}

// OptionalID parses a UUID field that may be empty.
func OptionalID(field, value string) (uuid.NullUUID, error) {
	if value == "" {
		return uuid.NullUUID{}, nil
	}
	id, err := parseID(field, value)
	return uuid.NullUUID{UUID: id, Valid: err == nil}, err
}

// CheckText checks a string field: valid UTF-8 without NUL, at most limit
// characters, and not empty when required.
func CheckText(field, value string, required bool, limit int) error {
	if !utf8.ValidString(value) {
		return Invalid(field, "is not valid UTF-8")
	}
	if required && value == "" {
		return Invalid(field, "is required")
	}
	if n := utf8.RuneCountInString(value); n > limit {
		return Invalid(field, "is %d characters long; the limit is %d", n, limit)
	}
	for _, r := range value {
		if r == 0 {
			return Invalid(field, "must not contain NUL characters")
		}
	}
	return nil
}

// PageSize checks a page size field: 0 is the default (DefaultPageSize, at
// most limit).
func PageSize(field string, size int32, limit int) (int, error) {
	switch {
	case size < 0 || int(size) > limit:
		return 0, Invalid(field, "must be between 1 and %d (0 for the default), got %d", limit, size)
	case size == 0:
		return min(DefaultPageSize, limit), nil
	}
	return int(size), nil
}

// Page checks a list request's pageSize and pageToken fields: the page's
// size (0 asks for DefaultPageSize) and where it starts (nil: the first
// page).
func Page(pageSize int32, pageToken string) (int, *conversation.PageCursor, error) {
	limit, err := PageSize("pageSize", pageSize, MaxPageSize)
	if err != nil {
		return 0, nil, err
	}
	after, err := DecodePageToken("pageToken", pageToken)
	if err != nil {
		return 0, nil, err
	}
	return limit, after, nil
}

// EncodePageToken makes the page token after c. Page tokens are opaque to
// clients: base64url of the last row's time (Unix microseconds) and id.
func EncodePageToken(c conversation.PageCursor) string {
	b := make([]byte, 8, 24)
	binary.BigEndian.PutUint64(b, uint64(c.Time.UnixMicro()))
	b = append(b, c.ID[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodePageToken reads a page token field ("" is the first page).
func DecodePageToken(field, token string) (*conversation.PageCursor, error) {
	if token == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != 24 {
		return nil, Invalid(field, "is not a page token this server issued")
	}
	micros := binary.BigEndian.Uint64(b[:8])
	if micros > math.MaxInt64 {
		return nil, Invalid(field, "is not a page token this server issued")
	}
	c := &conversation.PageCursor{Time: time.UnixMicro(int64(micros))}
	copy(c.ID[:], b[8:])
	return c, nil
}

// CheckMessageText checks a user's message as SendMessage does (required,
// at most MaxMessageText characters, no NUL, and something visible: not
// only whitespace, control, zero-width, bidi control or blank characters
// such as U+2800; see Invisible). The error is Invalid and names field.
func CheckMessageText(field, text string) error {
	if err := CheckText(field, text, true, MaxMessageText); err != nil {
		return err
	}
	if !HasVisible(text) {
		return Invalid(field, "must not be only whitespace, control, zero-width, bidi control or blank (U+2800, …) characters: it shows nothing")
	}
	return nil
}

// CheckTitle checks a conversation's title, in every protocol: valid
// UTF-8, at most MaxTitle characters, one line of text (no control
// character: no CR, LF, TAB, ESC, BEL, DEL nor C1 control; no line or
// paragraph separator, U+2028 or U+2029), and, unless
// empty, something visible (see Invisible); required refuses the empty
// title. The error is Invalid and names field. convo._check_title applies
// the same rule in the database.
func CheckTitle(field, title string, required bool) error {
	if err := CheckText(field, title, required, MaxTitle); err != nil {
		return err
	}
	for i, r := range []rune(title) {
		switch {
		case unicode.Is(unicode.Cc, r):
			return Invalid(field, "must not contain control characters (U+%04X at character %d): a title is one line of text", r, i+1)
		case unicode.In(r, unicode.Zl, unicode.Zp):
			return Invalid(field, "must not contain line or paragraph separators (U+%04X at character %d): a title is one line of text", r, i+1)
		}
	}
	if title != "" && !HasVisible(title) {
		return Invalid(field, "must not be only whitespace, zero-width, bidi control or blank (U+2800, …) characters: it shows nothing")
	}
	return nil
}

// Invisible reports whether r shows nothing by itself: white space, a
// control character (Cc), a format character (Cf: the zero-width
// characters U+200B–U+200D, U+2060 and U+FEFF, the bidi controls U+200E,
// U+200F, U+202A–U+202E and U+2066–U+2069, the soft hyphen, …), a
// variation selector, another default-ignorable code point (Hangul
// fillers, tag characters, …), or a symbol drawn blank (see blank).
// convo._has_visible in the database uses the same set, and so does the
// TypeScript client's showsSomething.
func Invisible(r rune) bool {
	return unicode.In(r, unicode.White_Space, unicode.Cc, unicode.Cf, unicode.Z,
		unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point, blank)
}

// blank are the symbols that fonts draw as nothing though Unicode counts
// them as graphic: U+2800 BRAILLE PATTERN BLANK and U+1D159 MUSICAL SYMBOL
// NULL NOTEHEAD, the two blank characters outside the sets above that
// pass for empty text.
var blank = &unicode.RangeTable{
	R16: []unicode.Range16{{Lo: 0x2800, Hi: 0x2800, Stride: 1}},
	R32: []unicode.Range32{{Lo: 0x1D159, Hi: 0x1D159, Stride: 1}},
}

// HasVisible reports whether s has a character that is not Invisible.
func HasVisible(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !Invisible(r) }) >= 0
}

// ModelConfigJSON validates a model configuration and returns it as the
// JSON object stored on the prompt (proto3 JSON, lowerCamel names). The
// error is Invalid and names field (or a subfield).
func ModelConfigJSON(field string, cfg *convov1.ModelConfig) ([]byte, error) {
	if cfg == nil {
		return []byte("{}"), nil
	}
	if err := CheckText(field+".provider", cfg.GetProvider(), false, MaxModelName); err != nil {
		return nil, err
	}
	if err := CheckText(field+".model", cfg.GetModel(), false, MaxModelName); err != nil {
		return nil, err
	}
	if err := CheckText(field+".systemPrompt", cfg.GetSystemPrompt(), false, MaxSystemPrompt); err != nil {
		return nil, err
	}
	if cfg.Temperature != nil {
		if t := cfg.GetTemperature(); math.IsNaN(t) || t < 0 || t > 2 {
			return nil, Invalid(field+".temperature", "must be between 0 and 2, got %v", t)
		}
	}
	if cfg.MaxTokens != nil && (cfg.GetMaxTokens() < 1 || cfg.GetMaxTokens() > 1_000_000) {
		return nil, Invalid(field+".maxTokens", "must be between 1 and 1000000, got %d", cfg.GetMaxTokens())
	}
	return protojson.Marshal(cfg)
}

// ParseModelConfig reads a model configuration given as proto3 JSON (a
// convo.v1.ModelConfig, as the HTTP protocols take it) and checks it as
// ModelConfigJSON does, which it returns. The error is Invalid and names
// field (or a subfield).
func ParseModelConfig(field string, raw []byte) ([]byte, error) {
	cfg := &convov1.ModelConfig{}
	if err := protojson.Unmarshal(raw, cfg); err != nil {
		return nil, Invalid(field, "is not a model configuration: %v", err)
	}
	return ModelConfigJSON(field, cfg)
}

// Truncate shortens s to at most n bytes (on a rune boundary) for error
// messages that quote client input.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

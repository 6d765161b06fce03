package files

import (
	"mime"
	"strings"
	"unicode/utf8"
)

// MaxTextBytes is how much of a text file's start is read for search: its
// first MiB. The rest of a larger file is stored and served, not
// searched.
const MaxTextBytes = 1 << 20

// IsText reports whether files of mediaType (as DecideMediaType gives it,
// parameters and all) have their text indexed for search: every text/*
// type.
func IsText(mediaType string) bool {
	base, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		base = strings.ToLower(strings.TrimSpace(strings.SplitN(mediaType, ";", 2)[0]))
	}
	return strings.HasPrefix(base, "text/")
}

// textCapture keeps the first max bytes written to it and counts the
// rest: an upload tees its stream through it, so the text is read as the
// bytes are stored, and memory never holds more than max.
type textCapture struct {
	buf []byte
	max int
}

func (c *textCapture) Write(p []byte) (int, error) {
	keep := p[:min(c.max-len(c.buf), len(p))]
	if need := len(c.buf) + len(keep); need > cap(c.buf) {
		// Grown by doubling, but never past max (append would).
		grown := make([]byte, len(c.buf), min(c.max, max(2*cap(c.buf), need)))
		copy(grown, c.buf)
		c.buf = grown
	}
	c.buf = append(c.buf, keep...)
	return len(p), nil
}

// DecodeText returns b as text for indexing: UTF-8, each byte that is
// not part of a valid sequence (and each NUL, which PostgreSQL text
// cannot hold) replaced by U+FFFD, and a sequence cut short at the end
// (by MaxTextBytes) dropped. The same rule as the backfill of
// db/schema/00028_file_text_search.sql.
func DecodeText(b []byte) string {
	var s strings.Builder
	s.Grow(len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1 && !utf8.FullRune(b):
			// Only the end of the input can be a partial sequence.
			return s.String()
		case r == utf8.RuneError && n <= 1, r == 0:
			s.WriteRune(utf8.RuneError)
		default:
			s.Write(b[:n])
		}
		b = b[n:]
	}
	return s.String()
}

package files

import (
	"mime"
	"strings"
)

// inlineTypes are the media types served inline (shown in the page, an
// <img src>): raster images a browser decodes without running anything.
// SVG is not one: it is a document that may hold scripts.
var inlineTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
}

// disposition is the Content-Disposition of a file's content: inline for
// the types of inlineTypes, attachment (the browser downloads it, never
// renders it in convo's origin) for every other, with the filename in
// both forms of RFC 6266: an ASCII fallback and filename* in UTF-8.
func disposition(mediaType, filename string) string {
	kind := "attachment"
	if base, _, err := mime.ParseMediaType(mediaType); err == nil && inlineTypes[base] {
		kind = "inline"
	}
	return kind + `; filename="` + asciiFilename(filename) + `"; filename*=UTF-8''` + encodeRFC5987(filename)
}

// asciiFilename is filename with every byte that cannot stand in a
// quoted-string as it is (non-ASCII, control, quote, backslash) replaced
// by "_", for clients that do not read filename*.
func asciiFilename(filename string) string {
	var b strings.Builder
	for _, r := range filename {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// encodeRFC5987 percent-encodes s's UTF-8 bytes except RFC 5987's
// attr-chars, as filename* takes them.
func encodeRFC5987(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

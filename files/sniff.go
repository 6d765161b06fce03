package files

import (
	"mime"
	"strings"

	"github.com/gabriel-vasile/mimetype"
)

// SniffBytes is how much of the start of a file the media type is decided
// from.
const SniffBytes = 3072

// octetStream is what bytes of no known format are, and what a client
// that does not know the type declares.
const octetStream = "application/octet-stream"

// active are media types a browser runs or renders as a document (script,
// markup): the bytes must say so themselves; a declaration alone never
// makes a file one of them.
var active = map[string]bool{
	"text/html": true, "application/xhtml+xml": true, "image/svg+xml": true,
	"text/xml": true, "application/xml": true, "text/xsl": true,
	"text/javascript": true, "application/javascript": true, "application/x-javascript": true,
	"text/ecmascript": true, "application/ecmascript": true,
}

// DecideMediaType returns the media type of a file whose bytes start with
// head (its first SniffBytes bytes, or all of them) and whose uploader
// declared declared. The bytes decide; the declared type is kept only when
// it refines theirs within its family (text/csv, text/markdown for bytes
// that are text/plain; application/msword for an OLE container), and is
// ignored when empty or application/octet-stream. A *MediaTypeError when
// the declared type is malformed, or the bytes contradict it (HTML, SVG
// or an executable declared as an image; a PNG declared as a PDF; any
// script or markup type the bytes are not).
func DecideMediaType(head []byte, declared string) (string, error) {
	if len(head) > SniffBytes {
		head = head[:SniffBytes]
	}
	sniffed := mimetype.Detect(head)
	if strings.TrimSpace(declared) == "" {
		return sniffed.String(), nil
	}
	base, params, err := mime.ParseMediaType(declared)
	if err != nil || strings.Count(base, "/") != 1 || strings.HasPrefix(base, "/") || strings.HasSuffix(base, "/") {
		return "", &MediaTypeError{Declared: declared, Reason: "is not a media type (type/subtype)"}
	}
	if base == octetStream {
		return sniffed.String(), nil
	}
	// The bytes say as much as the declaration, or more (text/csv
	// declared as text/plain).
	for m := sniffed; m != nil; m = m.Parent() {
		if m.Is(base) {
			return sniffed.String(), nil
		}
	}
	if active[base] {
		return "", &MediaTypeError{Declared: declared, Sniffed: sniffed.String()}
	}
	// The declaration refines the bytes: a child of theirs in mimetype's
	// tree (a format whose start looks like its parent's) ...
	if known := mimetype.Lookup(base); known != nil {
		for m := known.Parent(); m != nil; m = m.Parent() {
			if m.Is(sniffed.String()) && !m.Is(octetStream) {
				return known.String(), nil
			}
		}
		return "", &MediaTypeError{Declared: declared, Sniffed: sniffed.String()}
	}
	// ... or a text format mimetype does not know, of bytes that are text.
	if sniffed.Is("text/plain") && strings.HasPrefix(base, "text/") {
		if cs := charset(sniffed.String()); cs != "" {
			params = map[string]string{"charset": cs}
		} else {
			params = nil
		}
		return mime.FormatMediaType(base, params), nil
	}
	return "", &MediaTypeError{Declared: declared, Sniffed: sniffed.String()}
}

// charset returns the charset parameter of media type t, or "".
func charset(t string) string {
	_, params, err := mime.ParseMediaType(t)
	if err != nil {
		return ""
	}
	return params["charset"]
}

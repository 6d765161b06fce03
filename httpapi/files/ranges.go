package files

import (
	"strconv"
	"strings"
)

// byteRange is the part of a file a response carries: n bytes from off.
type byteRange struct{ off, n int64 }

// rangeAnswer is what a Range header asks of a file.
type rangeAnswer int

const (
	// wholeFile: no Range, or one this server ignores (another unit,
	// several ranges, a malformed one: RFC 9110 lets a server ignore it).
	wholeFile rangeAnswer = iota
	// partOfFile: one satisfiable range, answered 206.
	partOfFile
	// unsatisfiable: one range that starts past the end, answered 416.
	unsatisfiable
)

// parseRange reads a Range header ("bytes=first-last", "bytes=first-",
// "bytes=-suffix") against a file of size bytes. Several ranges get the
// whole file (200): one response, no multipart/byteranges to assemble
// from a stream. A last past the end is clipped to it, as is a suffix
// longer than the file.
func parseRange(header string, size int64) (byteRange, rangeAnswer) {
	spec, ok := strings.CutPrefix(header, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return byteRange{}, wholeFile
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return byteRange{}, wholeFile
	}
	if first == "" {
		suffix, ok := digits(last)
		switch {
		case !ok:
			return byteRange{}, wholeFile
		case suffix == 0 || size == 0:
			return byteRange{}, unsatisfiable
		}
		suffix = min(suffix, size)
		return byteRange{off: size - suffix, n: suffix}, partOfFile
	}
	off, ok := digits(first)
	if !ok {
		return byteRange{}, wholeFile
	}
	end := size - 1
	if last != "" {
		l, ok := digits(last)
		if !ok || l < off {
			return byteRange{}, wholeFile
		}
		end = min(l, size-1)
	}
	if off >= size {
		return byteRange{}, unsatisfiable
	}
	return byteRange{off: off, n: end - off + 1}, partOfFile
}

// digits parses a non-negative decimal of digits only (no sign, no
// spaces), as a byte position is written.
func digits(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// etagMatches reports whether an If-None-Match header names etag (weakly
// compared, as RFC 9110 has it for If-None-Match), or is "*".
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

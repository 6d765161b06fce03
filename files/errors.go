package files

import (
	"fmt"

	"github.com/convo-dev/convo/conversation"
)

// The errors of the package. Each is, to errors.As, a
// *conversation.Error too, so every protocol gives it its code (not_found,
// invalid, resource_exhausted) and its message.
var (
	// ErrNotFound: no such file or blob, or the file is another owner's
	// (the two answer alike, so that ids cannot be probed).
	ErrNotFound = &conversation.Error{Code: conversation.NotFound, Message: "file not found"}
	// ErrEmpty: the upload had no bytes; nothing is kept.
	ErrEmpty = &conversation.Error{Code: conversation.Invalid, Message: "file: the file is empty (0 bytes)"}
)

// TooLargeError: the upload was larger than Limit bytes. It was stopped
// while reading, one byte past the limit, and nothing of it is kept.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("file: larger than the limit of %d bytes (%s)", e.Limit, BinarySize(e.Limit))
}

// As makes the error a conversation.Error (invalid) to errors.As.
func (e *TooLargeError) As(target any) bool {
	return asConversation(target, conversation.Invalid, e.Error())
}

// QuotaError: keeping the upload would take its owner's files past Limit
// bytes (Used are held already, Size is the upload's). Nothing is kept.
type QuotaError struct {
	Limit, Used, Size int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("file: storing %d more bytes would exceed the limit of %d bytes (%s) per user; %d are stored",
		e.Size, e.Limit, BinarySize(e.Limit), e.Used)
}

// As makes the error a conversation.Error (resource_exhausted) to errors.As.
func (e *QuotaError) As(target any) bool {
	return asConversation(target, conversation.ResourceExhausted, e.Error())
}

// MediaTypeError: the declared media type (mediaType) is not one the
// bytes can be: they are Sniffed. Nothing is kept.
type MediaTypeError struct {
	Declared, Sniffed string
	// Reason, when set, says what is wrong with Declared itself.
	Reason string
}

func (e *MediaTypeError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("mediaType: %q %s", e.Declared, e.Reason)
	}
	return fmt.Sprintf("mediaType: declared %q, but the bytes are %q", e.Declared, e.Sniffed)
}

// As makes the error a conversation.Error (invalid) to errors.As.
func (e *MediaTypeError) As(target any) bool {
	return asConversation(target, conversation.Invalid, e.Error())
}

// FilenameError: the filename is refused, for Reason. Nothing is kept.
type FilenameError struct {
	Filename string
	Reason   string
}

func (e *FilenameError) Error() string {
	return fmt.Sprintf("filename: %q %s", truncate(e.Filename, 64), e.Reason)
}

// As makes the error a conversation.Error (invalid) to errors.As.
func (e *FilenameError) As(target any) bool {
	return asConversation(target, conversation.Invalid, e.Error())
}

func asConversation(target any, code conversation.Code, message string) bool {
	p, ok := target.(**conversation.Error)
	if ok {
		*p = &conversation.Error{Code: code, Message: message}
	}
	return ok
}

// BinarySize renders n bytes in the largest binary unit that divides it
// ("25 MiB", "64 KiB", "1000 bytes"), as every limit is stated.
func BinarySize(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// truncate shortens s to at most n bytes for a message, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

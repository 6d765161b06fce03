package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig of GIFs
	_ "image/jpeg"
	_ "image/png"
	"strings"
	"unicode/utf8"

	"github.com/convo-dev/convo/worker"
)

// attachment is what the demo model says of a file of the user's message:
// it reads the bytes, so that a reply shows they reached the worker.
type attachment struct {
	Filename  string `json:"filename"`
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
	// FirstLine is a text file's first line (at most 120 characters).
	FirstLine *string `json:"firstLine,omitempty"`
	// Width and Height are an image's (PNG, JPEG, GIF), from its header.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// Unavailable: the worker could not reach the bytes (a file in S3).
	Unavailable bool `json:"unavailable,omitempty"`
	described   string
}

// The bytes the demo model reads of a file: a text file's first line, an
// image's header.
const (
	firstLineBytes = 4096
	imageHeadBytes = 64 << 10
	firstLineRunes = 120
)

// readAttachments reads what the demo model says of each file. An error
// reading a file the worker can reach fails the reply.
func readAttachments(ctx context.Context, files []worker.File) ([]attachment, error) {
	var out []attachment
	for _, f := range files {
		a := attachment{Filename: f.Filename, MediaType: f.MediaType, Size: f.Size, described: f.Describe()}
		var limit int64
		switch {
		case f.IsText():
			limit = firstLineBytes
		case f.IsImage():
			limit = imageHeadBytes
		}
		if limit > 0 {
			data, _, err := f.Read(ctx, limit)
			switch {
			case errors.Is(err, worker.ErrFileUnavailable):
				a.Unavailable = true
			case err != nil:
				return nil, err
			case f.IsText():
				line := firstLine(data)
				a.FirstLine = &line
			default:
				if c, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
					a.Width, a.Height = c.Width, c.Height
				}
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// firstLine is the first line of data, valid UTF-8, at most
// firstLineRunes characters (cut with "…").
func firstLine(data []byte) string {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	s := strings.TrimRight(strings.ToValidUTF8(string(line), "\uFFFD"), "\r")
	if utf8.RuneCountInString(s) > firstLineRunes {
		s = string([]rune(s)[:firstLineRunes]) + "…"
	}
	return s
}

// markdown acknowledges the attachments, one line each, escaped.
func attachmentsMarkdown(as []attachment) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "You attached %s", escapeMarkdown(a.described))
		switch {
		case a.Unavailable:
			b.WriteString("; its bytes are not available to this worker")
		case a.FirstLine != nil && *a.FirstLine == "":
			b.WriteString("; its first line is empty")
		case a.FirstLine != nil:
			fmt.Fprintf(&b, "; its first line: \"%s\"", escapeMarkdown(*a.FirstLine))
		case a.Width > 0:
			fmt.Fprintf(&b, "; %d×%d pixels", a.Width, a.Height)
		}
		b.WriteString(".\n\n")
	}
	return b.String()
}

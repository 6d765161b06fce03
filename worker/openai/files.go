package openai

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/convo-dev/convo/worker"
)

// The defaults of Options.MaxFileBytes and Options.MaxTextFileBytes.
const (
	DefaultMaxFileBytes     = 10 << 20
	DefaultMaxTextFileBytes = 100_000
)

// contentPart is one part of a user message's content array: text, an
// image (a data URL), or a file (a PDF, as a data URL).
type contentPart struct {
	Type     string        `json:"type"` // "text", "image_url" or "file"
	Text     string        `json:"text,omitempty"`
	ImageURL *partImageURL `json:"image_url,omitempty"`
	File     *partFile     `json:"file,omitempty"`
}

type partImageURL struct {
	URL string `json:"url"`
}

type partFile struct {
	Filename string `json:"filename"`
	FileData string `json:"file_data"`
}

// fileError is an error reading a file of the context: the worker's, not
// the server's, so its message is not said to come from the server.
type fileError struct{ err error }

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

func textPart(format string, args ...any) contentPart {
	return contentPart{Type: "text", Text: fmt.Sprintf(format, args...)}
}

// userContent is a user message's content: its text as a string when it
// holds no files; otherwise an array of parts, its text then one part per
// file (filePart).
func (m *model) userContent(ctx context.Context, msg worker.Message) (any, error) {
	if len(msg.Files) == 0 {
		return msg.Text, nil
	}
	parts := []contentPart{}
	if msg.Text != "" {
		parts = append(parts, contentPart{Type: "text", Text: msg.Text})
	}
	for _, f := range msg.Files {
		p, err := m.filePart(ctx, f)
		if err != nil {
			return nil, &fileError{err: err}
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// filePart is what the model is given of f: an image (PNG, JPEG, GIF,
// WebP) as an image_url part and a PDF as a file part, both base64 data
// URLs, when no larger than MaxFileBytes; a text or JSON file as a text
// part of its first MaxTextFileBytes (saying so when cut); any other file,
// or one whose bytes this worker cannot reach, as a text line naming it.
func (m *model) filePart(ctx context.Context, f worker.File) (contentPart, error) {
	switch {
	case f.IsImage() || f.IsPDF():
		if f.Size > m.opts.MaxFileBytes {
			return textPart("The user attached %s; it is not shown to you: it is larger than the %s this worker sends.",
				f.Describe(), worker.HumanBytes(m.opts.MaxFileBytes)), nil
		}
		data, _, err := f.Read(ctx, m.opts.MaxFileBytes)
		if errors.Is(err, worker.ErrFileUnavailable) {
			return unavailable(f), nil
		} else if err != nil {
			return contentPart{}, err
		}
		if f.IsImage() {
			return contentPart{Type: "image_url", ImageURL: &partImageURL{URL: f.DataURL(data)}}, nil
		}
		return contentPart{Type: "file", File: &partFile{Filename: f.Filename, FileData: f.DataURL(data)}}, nil
	case f.IsText():
		data, cut, err := f.Read(ctx, m.opts.MaxTextFileBytes)
		if errors.Is(err, worker.ErrFileUnavailable) {
			return unavailable(f), nil
		} else if err != nil {
			return contentPart{}, err
		}
		if cut {
			// Not in the middle of a character.
			for i := 0; i < utf8.UTFMax-1 && len(data) > 0 && !utf8.Valid(data); i++ {
				data = data[:len(data)-1]
			}
		}
		text := strings.ToValidUTF8(string(data), "\uFFFD")
		if cut {
			return textPart("The user attached %s. Its first %s (the rest is cut):\n\n%s",
				f.Describe(), worker.HumanBytes(int64(len(data))), text), nil
		}
		return textPart("The user attached %s. Its content:\n\n%s", f.Describe(), text), nil
	}
	return textPart("The user attached %s; its content is not shown to you (this worker sends images, PDFs and text).",
		f.Describe()), nil
}

func unavailable(f worker.File) contentPart {
	return textPart("The user attached %s; its content is not available to this worker.", f.Describe())
}

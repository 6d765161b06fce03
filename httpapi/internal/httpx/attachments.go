package httpx

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/wire"
)

// Attachment is a file a protocol's user message carries (an AI SDK file
// part, an AG-UI media part): its bytes inline, or a file convo holds
// already.
type Attachment struct {
	// Field names it in errors ("messages[2].parts[1]").
	Field     string
	Filename  string
	MediaType string // as declared; the bytes decide (files.Service)
	// Data are the inline bytes; nil when ID names a file.
	Data []byte
	// ID is a file convo holds (one of its URLs named it).
	ID uuid.UUID
}

// ReadDataURL reads a data: URL (RFC 2397) holding base64 bytes: its
// media type and bytes. Errors are Invalid, naming field.
func ReadDataURL(field, u string) (mediaType string, data []byte, err error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", nil, wire.Invalid(field, "is not a data: URL")
	}
	header, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, wire.Invalid(field, "is not a data: URL: no comma before its data")
	}
	params := strings.Split(header, ";")
	if params[len(params)-1] != "base64" {
		return "", nil, wire.Invalid(field, "must hold base64 data (data:<type>;base64,…)")
	}
	data, err = base64.StdEncoding.DecodeString(payload)
	if err != nil {
		if data, err = base64.RawStdEncoding.DecodeString(payload); err != nil {
			return "", nil, wire.Invalid(field, "is not valid base64: %v", err)
		}
	}
	return params[0], data, nil
}

// FileURLID returns the id of the file one of convo's own file URLs names
// (/v1/files/{id}/content or /v1/files/{id}, relative or absolute, with or
// without a signature), and whether u is one. Whether the file is the
// caller's is checked where it is attached.
func FileURLID(u string) (uuid.UUID, bool) {
	parsed, err := url.Parse(u)
	if err != nil {
		return uuid.Nil, false
	}
	rest, ok := strings.CutPrefix(parsed.Path, "/v1/files/")
	if !ok {
		return uuid.Nil, false
	}
	rest = strings.TrimSuffix(rest, "/content")
	id, err := uuid.Parse(rest)
	return id, err == nil && !strings.Contains(rest, "/")
}

// StoreAttachments returns the file ids of a user message's attachments,
// in order: a file named by id as it is (the store checks it is the
// owner's when it attaches it); inline bytes uploaded to files.Service,
// with its checks (size, media type, filename) and the owner's quota.
// Errors name the attachment's field; FailedPrecondition when the server
// keeps no files. Files uploaded before a later attachment is refused are
// held by no message, and the collector removes them after its grace
// period.
func (s *Server) StoreAttachments(ctx context.Context, owner string, atts []Attachment) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, 0, len(atts))
	for _, a := range atts {
		if a.Data == nil {
			ids = append(ids, a.ID)
			continue
		}
		if s.Files == nil {
			return nil, conversation.Errorf(conversation.FailedPrecondition, "%s: this server keeps no files", a.Field)
		}
		f, err := s.Files.Upload(ctx, owner, a.Filename, a.MediaType, bytes.NewReader(a.Data))
		if err != nil {
			var ce *conversation.Error
			if errors.As(err, &ce) {
				return nil, conversation.Errorf(ce.Code, "%s: %s", a.Field, ce.Message)
			}
			return nil, err
		}
		ids = append(ids, f.ID)
	}
	return ids, nil
}

// MaxAttachments bounds the attachments of one message: the server's
// files per message.
func (s *Server) MaxAttachments() int {
	if s.MaxFilesPerMessage > 0 {
		return s.MaxFilesPerMessage
	}
	return files.DefaultMaxFilesPerMessage
}

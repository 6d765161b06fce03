package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
)

// inputPart is one part of an input message's content: input_text
// (text), input_image (image_url or file_id) or input_file (file_id,
// file_data with filename, or file_url), as the SDKs send them
// (ResponseInputTextParam, ResponseInputImageParam,
// ResponseInputFileParam). detail is ignored: the worker's model decides.
type inputPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	ImageURL *string `json:"image_url"`
	FileID   *string `json:"file_id"`
	FileData *string `json:"file_data"`
	FileURL  *string `json:"file_url"`
	Filename *string `json:"filename"`
}

// inputFile reads an input_image or input_file part as the file the
// user's message holds, as the AI SDK and AG-UI routes read theirs
// (httpx.Attachment; its bytes stored with every check of an upload,
// httpx.Server.StoreAttachments):
//
//   - file_id: a convo file id (a UUID, as POST /v1/files answers it);
//   - image_url: a data: URL (base64), or one of convo's own file URLs;
//   - file_data: the bytes, a data: URL or bare base64, with filename;
//   - file_url: one of convo's own file URLs. convo fetches no other URL.
//
// Exactly one source is allowed. Errors are 400s naming the part's field
// (input[0].content[1].image_url).
func inputFile(field string, p inputPart) (httpx.Attachment, error) {
	a := httpx.Attachment{Field: field, Filename: "file"}
	if p.Type == "input_image" {
		a.Filename = "image"
	}
	if p.Filename != nil && *p.Filename != "" {
		a.Filename = *p.Filename
	}
	var sources []string
	for name, v := range map[string]*string{"file_id": p.FileID, "image_url": p.ImageURL, "file_data": p.FileData, "file_url": p.FileURL} {
		if v != nil && *v != "" {
			sources = append(sources, name)
		}
	}
	want := "file_id, file_data or file_url"
	if p.Type == "input_image" {
		want = "image_url or file_id"
	}
	if len(sources) != 1 {
		return a, invalid(field, "invalid_value", fmt.Sprintf("%s (an %s part) needs exactly one of %s.", field, p.Type, want))
	}
	switch src := sources[0]; {
	case src == "file_id":
		id, err := uuid.Parse(*p.FileID)
		if err != nil || len(*p.FileID) != 36 {
			return a, invalid(field+".file_id", "invalid_value",
				fmt.Sprintf("%s.file_id '%s' is not a convo file id (a UUID, as POST /v1/files answers it).", field, clip(*p.FileID)))
		}
		a.ID = id
	case src == "image_url" && p.Type == "input_image":
		return a, dataOrFileURL(&a, field+".image_url", *p.ImageURL)
	case src == "file_url" && p.Type == "input_file":
		id, ok := httpx.FileURLID(*p.FileURL)
		if !ok {
			return a, invalid(field+".file_url", "invalid_value", field+".file_url must be one of convo's file URLs (/v1/files/{id}/content): convo fetches no other URL; send the bytes as file_data, or upload them (POST /v1/files) and send file_id.")
		}
		a.ID = id
	case src == "file_data" && p.Type == "input_file":
		if p.Filename == nil || *p.Filename == "" {
			return a, invalid(field+".filename", "missing_required_parameter", "Missing required parameter: '"+field+".filename' (with file_data).")
		}
		if strings.HasPrefix(*p.FileData, "data:") {
			return a, dataOrFileURL(&a, field+".file_data", *p.FileData)
		}
		data, err := base64.StdEncoding.DecodeString(*p.FileData)
		if err != nil {
			return a, invalid(field+".file_data", "invalid_value", fmt.Sprintf("%s.file_data is neither a data: URL nor valid base64: %v", field, err))
		}
		a.Data = data
	default:
		return a, invalid(field+"."+src, "unsupported_parameter", fmt.Sprintf("%s: an %s part takes %s, not %s.", field, p.Type, want, src))
	}
	return a, nil
}

// dataOrFileURL sets a's bytes from a data: URL (its media type the
// declared one), or its file from one of convo's own file URLs.
func dataOrFileURL(a *httpx.Attachment, field, u string) error {
	if id, ok := httpx.FileURLID(u); ok {
		a.ID = id
		return nil
	}
	if !strings.HasPrefix(u, "data:") {
		return invalid(field, "invalid_value", field+" must be a data: URL (the file's bytes, base64) or one of convo's file URLs (/v1/files/{id}/content): convo fetches no other URL.")
	}
	mediaType, data, err := httpx.ReadDataURL(field, u)
	if err != nil {
		return invalid(field, "invalid_value", err.Error())
	}
	a.MediaType, a.Data = mediaType, data
	return nil
}

// storeFiles stores the input's files as the AI SDK and AG-UI routes
// store theirs: at most the server's files per message (more is a 400
// naming input), inline bytes uploaded with every check of an upload
// and the owner's quota (a refusal names the part), files named by id
// kept as they are for the send to check. It returns their ids, in
// order. Files uploaded before a later part is refused are held by no
// message, and the collector removes them after its grace period.
func (h *Handler) storeFiles(ctx context.Context, owner string, atts []httpx.Attachment) ([]uuid.UUID, error) {
	if len(atts) == 0 {
		return nil, nil
	}
	if max := h.srv.MaxAttachments(); len(atts) > max {
		return nil, invalid("input", "invalid_value", fmt.Sprintf("input holds %d files; a message holds at most %d (the server's files per message).", len(atts), max))
	}
	return h.srv.StoreAttachments(ctx, owner, atts)
}

// fileIndex reads the index the store's refusal of a message's files
// names (file_ids[i]).
var fileIndex = regexp.MustCompile(`file_ids\[(\d+)\]`)

// fileRefusal is err, the store's refusal of a send, renamed for the
// Responses API: a file it refuses (not the caller's, none, listed twice)
// is a 400 naming the input part that named it.
func fileRefusal(err error, atts []httpx.Attachment) error {
	var ce *conversation.Error
	if !errors.As(err, &ce) || (ce.Code != conversation.NotFound && ce.Code != conversation.Invalid) {
		return err
	}
	m := fileIndex.FindStringSubmatch(ce.Message)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[1])
	if i >= len(atts) {
		return err
	}
	msg := ce.Message
	if _, rest, ok := strings.Cut(msg, m[0]+": "); ok {
		msg = rest
	}
	return invalid(atts[i].Field, "invalid_value", atts[i].Field+": "+msg)
}

// fileFields are what an input_image or input_file part shows of its
// file: OpenAI's file_id (convo's), the filename, and an image's detail.
type fileFields struct {
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
}

// filePart is the content part showing a file of a user message: an
// input_image for an image, else an input_file.
func filePart(f conversation.MessageFile) contentPart {
	typ := "input_file"
	if strings.HasPrefix(f.MediaType, "image/") {
		typ = "input_image"
	}
	return contentPart{Type: typ, file: &fileFields{FileID: f.ID.String(), Filename: f.Filename}}
}

// userParts are a user message's content parts: its text (input_text,
// left out when empty and there are files), then its files.
func userParts(text string, files []conversation.MessageFile) []contentPart {
	parts := []contentPart{}
	if text != "" || len(files) == 0 {
		parts = append(parts, contentPart{Type: "input_text", Text: text})
	}
	for _, f := range files {
		parts = append(parts, filePart(f))
	}
	return parts
}

// messageFile reads a "file" block's metadata; false for another block
// or metadata that names no file.
func messageFile(b conversation.Block) (conversation.MessageFile, bool) {
	var f conversation.MessageFile
	if b.Type != "file" || json.Unmarshal(b.Metadata, &f) != nil || f.ID == uuid.Nil {
		return f, false
	}
	return f, true
}

// MarshalJSON writes a part: a file's part with its file's fields (and,
// for an image, detail "auto") in place of text, as OpenAI's
// ResponseInputImage and ResponseInputFile have them; any other as it is.
func (p contentPart) MarshalJSON() ([]byte, error) {
	type plain contentPart
	if p.file == nil {
		return json.Marshal(plain(p))
	}
	out := struct {
		Type string `json:"type"`
		*fileFields
		Detail string `json:"detail,omitempty"`
	}{Type: p.Type, fileFields: p.file}
	if p.Type == "input_image" {
		out.Detail = "auto"
	}
	return json.Marshal(out)
}

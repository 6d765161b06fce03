package wire

import (
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// UserMessage checks what a user's message holds, as SendMessage and
// EditMessage take it: its text (textField) and the ids of the files it
// holds (filesField: uploads of the caller's). The ids must be UUIDs, each
// listed once, at most maxFiles of them. Text is required, as
// CheckMessageText says, unless the message holds files: then it may be
// empty (a message of files only). Errors are Invalid and name the field,
// an id by its index (fileIds[2]). Whether each file is the caller's is
// the store's to check, in the transaction that attaches them.
func UserMessage(textField, text, filesField string, fileIDs []string, maxFiles int) ([]uuid.UUID, error) {
	if len(fileIDs) > maxFiles {
		return nil, Invalid(filesField, "holds %d files; a message holds at most %d (the server's files per message, CONVO_FILE_MAX_PER_MESSAGE)",
			len(fileIDs), maxFiles)
	}
	ids := make([]uuid.UUID, len(fileIDs))
	seen := map[uuid.UUID]int{}
	for i, s := range fileIDs {
		field := fmt.Sprintf("%s[%d]", filesField, i)
		id, err := RequireID(field, s)
		if err != nil {
			return nil, err
		}
		if j, ok := seen[id]; ok {
			return nil, Invalid(field, "file %s is listed twice (%s[%d])", id, filesField, j)
		}
		seen[id], ids[i] = i, id
	}
	if len(ids) == 0 {
		return nil, CheckMessageText(textField, text)
	}
	return ids, CheckText(textField, text, false, MaxMessageText)
}

// FileURLs signs the URLs of files' content that messages carry
// (convov1.File.url): files.Signer in a server.
type FileURLs interface {
	// FileURL returns the signed URL of file id's content, relative to
	// the server, and when it expires.
	FileURL(id string) (url string, expires time.Time)
}

// fileOf is a "file" block's file, read from its metadata as
// convo._write_user_blocks wrote it ({"fileId", "filename", "mediaType",
// "size", "sha256"}), taking only values of the right type (as
// convo._file_json does for events); nil for another block type.
func fileOf(blockType string, metadata *structpb.Struct) *convov1.File {
	if blockType != "file" {
		return nil
	}
	f := metadata.GetFields()
	str := func(key string) string { return f[key].GetStringValue() }
	out := &convov1.File{Id: str("fileId"), Filename: str("filename"), MediaType: str("mediaType"), Sha256: str("sha256")}
	if n, ok := f["size"].GetKind().(*structpb.Value_NumberValue); ok && n.NumberValue >= 0 && n.NumberValue <= 1<<53 &&
		n.NumberValue == math.Trunc(n.NumberValue) {
		out.Size = int64(n.NumberValue)
	}
	return out
}

// SignFiles sets the signed URL of every file block of msgs (nothing when
// urls is nil: a server without files signs none).
func SignFiles(urls FileURLs, msgs ...*convov1.Message) {
	if urls == nil {
		return
	}
	for _, m := range msgs {
		for _, b := range m.GetBlocks() {
			if f := b.GetFile(); f != nil && f.GetId() != "" {
				if u, exp := urls.FileURL(f.GetId()); u != "" {
					f.Url, f.UrlExpiresAt = u, timestamppb.New(exp)
				}
			}
		}
	}
}

// eventMessages returns the messages an event carries (a created or
// updated message, a switched path's, a pause's reply).
func eventMessages(e *convov1.Event) []*convov1.Message {
	switch k := e.GetKind().(type) {
	case *convov1.Event_MessageCreated:
		return []*convov1.Message{k.MessageCreated.GetMessage()}
	case *convov1.Event_MessageUpdated:
		return []*convov1.Message{k.MessageUpdated.GetMessage()}
	case *convov1.Event_BranchSwitched:
		return k.BranchSwitched.GetMessages()
	}
	if m, ok := pauseMessage(e); ok {
		return []*convov1.Message{m}
	}
	return nil
}
